"""One command on one GPU: do the Megatron workers (and vLLM, where installed) run on CUDA?

    python bench/gpu_smoke.py                 # on a GPU machine; prints PASS / FAIL / SKIP per part and memory
    python bench/gpu_smoke.py --device cpu    # the same parts on this CPU (checks the script itself, in float32)

Parts, each independent (a failure is printed with its error and the next part runs):

1. ``workers``: the real ``PolicyWorker`` and ``ValueWorker`` (a world of one process) on the GPU, fed batches built
   on the CPU as the driver builds them: logprobs, reference logprobs, values, a PPO update of actor and critic, a
   supervised step.  Every result must come back on the CPU and be finite (the device rule).
2. ``hf_parity``: the policy's logprobs against ``transformers``' forward pass on the same checkpoint, in the
   worker's dtype (bfloat16 on the GPU): the mean absolute difference must stay under 0.05 nats.
3. ``offload``: the actor's and critic's parameters, gradients and optimizer state leave the GPU
   (``ModelUpdater.offload``) and come back (``onload``); memory allocated is printed at each phase, and the
   update after the round trip must be finite.
4. ``recompute``: a larger model (about 90M parameters) on four 2048-token rows: one supervised step without and
   one with full activation recomputation; peak memory of each is printed, recomputation must lower it and leave
   the loss and the gradient norm unchanged.
5. ``ipc_refit``: the refit's same-GPU path without vLLM: the policy packs its weights into buckets on the GPU and
   hands each over as a CUDA IPC handle; another process opens the handle, as a colocated engine does, and sends the
   tensors back; each must equal the policy's export bit for bit.
6. ``memory_plan``: the memory plan's prediction (``ppo/workers/memory.py``) against the allocator's peak for a
   policy rank (with a reference model) of a random ~1.26B-parameter model built from a config (no download), more
   than 20 GiB in every phase: training and logprobs each within 10 % of the measurement; after ``offload`` the
   rank's allocations and PyTorch's cache (the reference's blocks included) are near empty.
7. ``vllm``: a vLLM engine on the GPU next to the workers: generate, sleep (weights and KV cache freed), wake, load
   the policy's weights (the refit) and generate again; memory at each phase.  SKIP where vLLM is not installed.

What this does not cover: more than one GPU (NCCL groups, the broadcast refit) and Ray placement.  The lent H200
image has PyTorch and transformers but not megatron-core (carry its wheel, a few MB) nor vLLM or Ray, whose CUDA
wheels exceed what one device call can carry, so part 7 SKIPs there.  The command used on it, from the repository
root, after ``pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl megatron-core==0.16.1``
(the device tool's notes give the platform flags)::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
    PYTHONUNBUFFERED=1 python3 -W ignore::UserWarning bench/gpu_smoke.py

Its output of 2026-12-04 is ``bench/results/gpu_smoke-h200-2026-12-04.log``; the README's "Status and known limits"
has the table.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from ppo.cluster.ports import free_port  # noqa: E402


def memory(device: torch.device) -> str:
    if device.type != "cuda":
        return "n/a on CPU"
    allocated = torch.cuda.memory_allocated(device) / 2**20
    free, total = torch.cuda.mem_get_info(device)
    return f"{allocated:8.1f} MiB allocated by this process, {(total - free) / 2**30:6.2f} GiB used on the device"


def build_workers(model_dir: str, dtype: str):
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.specs import MegatronCritic, MegatronPolicy, PolicyLoss
    from ppo.workers.value import ValueWorker

    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", master_port=free_port(), seed=0)
    policy = PolicyWorker(MegatronPolicy(dtype=dtype, micro_batch_tokens=64, loss=PolicyLoss(kl_coef=0.01)),
                          model_dir, with_reference=True, **common)
    critic = ValueWorker(MegatronCritic(dtype=dtype, micro_batch_tokens=64), model_dir, **common)
    return policy, critic


def rollout_batch(vocab: int):
    """A batch as the driver sends it: on the CPU, rows of different lengths, every field the losses read."""
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample

    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (4 + i % 3,), generator=g).tolist() for i in range(8)]
    samples = [[Sample(torch.randint(3, vocab, (n,), generator=g).tolist(), [-1.0] * n, "stop")]
               for n in (3, 5, 2, 6, 4, 1, 5, 3)]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * len(prompts))
    mask = batch.response_mask
    for name in ("advantages", "returns"):
        setattr(batch, name, torch.randn(mask.shape, generator=g) * mask)
    batch.rewards = (torch.rand(len(prompts), generator=g) > 0.5).float()
    return batch


def finite_on_cpu(name: str, value) -> None:
    values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
    for v in values:
        if isinstance(v, dict):
            finite_on_cpu(name, v)
        elif isinstance(v, torch.Tensor):
            assert v.device.type == "cpu", f"{name}: a result came back on {v.device}"
            assert torch.isfinite(v.float()).all(), f"{name}: non-finite values"
        elif isinstance(v, float):
            assert math.isfinite(v), f"{name}: {v}"


def part_workers(ctx) -> None:
    policy, critic, batch = ctx["policy"], ctx["critic"], ctx["batch"]
    batch.logp_old = policy.logprobs(batch)
    batch.logp_ref = policy.logprobs(batch, reference=True)
    batch.values = critic.values(batch)
    for name in ("logp_old", "logp_ref", "values"):
        finite_on_cpu(name, batch.get(name))
    finite_on_cpu("critic train", critic.train(batch, num_minibatches=2, seed=0))
    finite_on_cpu("policy train", policy.train(batch, num_minibatches=2, seed=0))
    finite_on_cpu("supervised step", policy.supervised_step(batch, lr=1e-4))
    print(f"    after the updates: {memory(policy.device)}")


def part_hf_parity(ctx) -> None:
    from transformers import AutoModelForCausalLM

    from ppo.workers.policy import PolicyWorker

    batch, device = ctx["batch"], ctx["device"]
    fresh = PolicyWorker(ctx["policy"].spec, ctx["model_dir"], rank=0, world_size=1, master_addr="127.0.0.1",
                         master_port=free_port(), seed=0)  # the untrained weights, as in the checkpoint
    ours = fresh.logprobs(batch)
    hf = AutoModelForCausalLM.from_pretrained(ctx["model_dir"], dtype=fresh.spec.dtype).to(device).eval()
    ids, segments = batch.input_ids.to(device), batch.segment_ids.to(device)
    with torch.no_grad():
        logits = hf(input_ids=ids, attention_mask=(segments > 0).long()).logits.float()
    theirs = torch.zeros_like(ours)
    theirs[:, 1:] = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0].cpu()
    mask = batch.response_mask.bool()
    gap = (ours - theirs)[mask].abs().mean().item()
    print(f"    mean |logp_megatron - logp_transformers| over response tokens: {gap:.4f} nats ({fresh.spec.dtype})")
    assert gap < 0.05, f"logprobs differ by {gap:.4f} nats on average"


def training_state_bytes(worker) -> int:
    """The least that ``offload`` must free: the parameters and the gradient buffer (the gradients are at least as
    wide as the parameters), plus the reference model where the worker keeps one."""
    params = sum(p.numel() * p.element_size() for p in worker.updater.module.parameters())
    reference = getattr(worker, "reference", None)
    return 2 * params + (sum(p.numel() * p.element_size() for p in reference.parameters()) if reference else 0)


def part_offload(ctx) -> None:
    policy, critic, batch, device = ctx["policy"], ctx["critic"], ctx["batch"], ctx["device"]
    on_gpu = device.type == "cuda"
    print(f"    train phase:              {memory(device)}")
    before = torch.cuda.memory_allocated(device) if on_gpu else 0
    for worker in (policy, critic):
        worker.offload()
    freed = before - torch.cuda.memory_allocated(device) if on_gpu else 0
    print(f"    generate phase (offload): {memory(device)}")
    for worker in (policy, critic):
        worker.onload()
    print(f"    train phase (onload):     {memory(device)}")
    finite_on_cpu("policy train after onload", policy.train(batch, num_minibatches=1, seed=1))
    if on_gpu:
        least = sum(training_state_bytes(worker) for worker in (policy, critic))
        print(f"    offload freed {freed / 2**20:.1f} MiB (parameters, gradients and reference alone: "
              f"{least / 2**20:.1f} MiB)")
        assert freed >= least, "offload left training state on the GPU"


def part_recompute(ctx) -> None:
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.recompute import Recompute
    from ppo.models.tiny import create_tiny_model
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.specs import MegatronPolicy

    device, dtype = ctx["device"], ctx["policy"].spec.dtype
    on_gpu = device.type == "cuda"
    size = dict(hidden_size=1024, num_layers=8, num_attention_heads=16, num_key_value_heads=4,
                intermediate_size=2816, max_position_embeddings=2048) if on_gpu else \
        dict(hidden_size=128, num_layers=2, max_position_embeddings=256)
    tokenizer = build_arithmetic_tokenizer()
    model_dir = str(create_tiny_model(Path(ctx["model_dir"]).parent / "large", tokenizer, **size))
    half = size["max_position_embeddings"] // 2
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, len(tokenizer), (half,), generator=g).tolist() for _ in range(4)]
    samples = [[Sample(torch.randint(3, len(tokenizer), (half,), generator=g).tolist(), [-1.0] * half, "stop")]
               for _ in prompts]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * len(prompts))
    results = {}
    for name, recompute in (("no recompute", Recompute()),
                            ("full recompute", Recompute(granularity="full", method="uniform", num_layers=1))):
        spec = MegatronPolicy(dtype=dtype, micro_batch_tokens=4 * half, recompute=recompute)
        worker = PolicyWorker(spec, model_dir, rank=0, world_size=1, master_addr="127.0.0.1",
                              master_port=free_port(), seed=0)
        if on_gpu:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        started = time.perf_counter()
        metrics = worker.supervised_step(batch, lr=1e-5)
        seconds = time.perf_counter() - started
        peak = torch.cuda.max_memory_allocated(device) / 2**20 if on_gpu else float("nan")
        results[name] = (float(metrics["loss"]), float(metrics["grad_norm"]), peak)
        params = sum(p.numel() for p in worker.updater.module.parameters()) / 1e6
        print(f"    {name:15} {params:.0f}M params, 4 x {2 * half} tokens: loss {results[name][0]:.5f}, "
              f"grad norm {results[name][1]:.5f}, peak {peak:8.1f} MiB allocated, {seconds:.2f} s (first step)")
        worker.updater.offload()
        del worker
        if on_gpu:
            torch.cuda.empty_cache()
    (loss0, norm0, peak0), (loss1, norm1, peak1) = results.values()
    assert abs(loss0 - loss1) < 1e-3 * abs(loss0), f"recomputation changed the loss: {loss0} vs {loss1}"
    assert abs(norm0 - norm1) < 2e-2 * abs(norm0), f"recomputation changed the gradient norm: {norm0} vs {norm1}"
    if on_gpu:
        assert peak1 < peak0, f"recomputation did not lower peak memory ({peak1:.0f} vs {peak0:.0f} MiB)"


def open_buckets(connection) -> None:
    """A stand-in for a colocated engine's process: open each IPC handle received, send the tensors back."""
    from ppo.workers.buckets import open_ipc_handle, unpack

    if torch.cuda.is_available():
        torch.cuda.set_device(0)
    while (message := connection.recv()) is not None:
        handle, bucket = message
        connection.send({name: t.cpu().clone() for name, t in unpack(open_ipc_handle(handle), bucket).items()})


def part_ipc_refit(ctx) -> None:
    import multiprocessing

    from ppo.workers.buckets import bucket_size

    policy = ctx["policy"]
    exported = policy.export()
    total = sum(t.numel() * t.element_size() for t in exported.values())
    buckets = policy.prepare_refit([0], bucket_bytes=total // 3)
    assert len(buckets) >= 3, f"{len(buckets)} buckets"
    spawn = multiprocessing.get_context("spawn")
    parent, child = spawn.Pipe()
    engine = spawn.Process(target=open_buckets, args=(child,))
    engine.start()
    received = {}
    try:
        for index, bucket in enumerate(buckets):
            policy.stage_refit_bucket(index)
            parent.send((policy.refit_handle(index), bucket))
            received.update(parent.recv())
        parent.send(None)
    finally:
        engine.join(timeout=60)
    assert engine.exitcode == 0, f"the receiving process exited with {engine.exitcode}"
    sizes = ", ".join(f"{bucket_size(b) / 2**10:.0f}" for b in buckets)
    print(f"    {len(buckets)} buckets ({sizes} KiB) on {policy.device}: {len(received)} tensors received")
    assert received.keys() == exported.keys(), "tensors missing from the buckets"
    for name, tensor in exported.items():
        assert received[name].dtype == tensor.dtype and torch.equal(received[name], tensor.cpu()), name


def part_vllm(ctx) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise Skip("vllm is not installed here") from None
    from ppo.rollout.settings import SamplingConfig, VLLMGeneration
    from ppo.rollout.vllm_engine import VLLMEngine

    device = ctx["device"]
    engine = VLLMEngine(VLLMGeneration(model_path=ctx["model_dir"],
                                       dtype="bfloat16" if device.type == "cuda" else "float32",
                                       max_model_len=64, kv_cache_bytes=256 << 20))
    sampling = SamplingConfig(n=2, temperature=1.0, max_new_tokens=8)
    prompts = [[5, 6, 7], [8, 9]]
    first = engine.generate(prompts, sampling, seed=0)
    print(f"    engine awake:  {memory(device)}")
    engine.sleep()
    print(f"    engine asleep: {memory(device)}")
    engine.wake_up()
    engine.refit(ctx["policy"].export().items())
    second = engine.generate(prompts, sampling, seed=0)
    print(f"    after refit:   {memory(device)}")
    assert len(first) == len(second) == 2 and all(len(g) == 2 for g in second)


MEMORY_PLAN_TOLERANCE = 0.10
"""How far the allocator's peak may stray from the plan's prediction in each phase (issue 34: a tenth)."""


def memory_plan_case(on_gpu: bool) -> tuple[dict, int]:
    """The ``memory_plan`` part's model (``create_tiny_model`` arguments) and row length.  On a GPU a random
    ~1.26B-parameter model whose Megatron state alone (18 bytes a parameter) is ~21 GiB, so that every phase fills
    more than 20 GiB of the GPU and the plan's uncertain terms (activations of 512-token rows: ~1 GiB) cannot hide a
    10 % error; on the CPU a toy that checks the script."""
    if on_gpu:
        return dict(hidden_size=2048, num_layers=28, num_attention_heads=16, num_key_value_heads=4,
                    intermediate_size=5632, max_position_embeddings=1024), 512
    return dict(hidden_size=128, num_layers=2, max_position_embeddings=256), 64


def predicted_memory(arch, dtype: str, row_tokens: int, *, on_gpu: bool, torch_adam: bool) -> dict[str, int]:
    """The plan's bytes (``ppo/workers/memory.py``) for one policy rank (TP 1, DP 1, the distributed optimizer on a
    GPU) with a reference model that trains and scores rows of ``row_tokens`` tokens one row per micro-batch (local
    layers: the ``row_tokens``² scores are kept): its weights, gradients, Adam state and reference, plus the phase's
    activations.
    ``torch_adam``: Megatron fell back on PyTorch's AdamW (no Transformer Engine or Apex), whose multi-tensor step
    holds a temporary fp32 copy of every parameter (:func:`ppo.workers.memory.adam_step_bytes`) after the
    activations are freed."""
    from ppo.workers.memory import GroupMemory, activation_bytes, adam_step_bytes, model_state_bytes, shard_parameters

    params = shard_parameters(arch, 1)
    group = GroupMemory(name="policy", tensor=1, data=1, dtype=dtype, distributed_optimizer=on_gpu,
                        micro_batch_tokens=row_tokens, flash_attention=False)
    parts = model_state_bytes(params, dtype, data=1, distributed=on_gpu)
    state = sum(parts.values()) + parts["weights"]  # the reference: the weights again
    step = adam_step_bytes(params, fused=not torch_adam)
    return {"training": state + max(activation_bytes(arch, group, training=True), step),
            "logprobs": state + activation_bytes(arch, group, training=False)}


def part_memory_plan(ctx) -> None:
    """Predicted (``ppo/workers/memory.py``) against measured peak memory of a policy rank per phase
    (:func:`memory_plan_case`, :func:`predicted_memory`): 4 rows, one GPU (TP 1, DP 1); each phase within
    :data:`MEMORY_PLAN_TOLERANCE` of the allocator's peak."""
    from megatron.core.optimizer import USING_PYTORCH_OPTIMIZER

    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.architecture import Architecture
    from ppo.models.tiny import create_tiny_model
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample
    from ppo.workers.memory import GIB, shard_parameters
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.specs import MegatronPolicy

    device, dtype = ctx["device"], ctx["policy"].spec.dtype
    on_gpu = device.type == "cuda"
    size, tokens = memory_plan_case(on_gpu)
    model_dir = create_tiny_model(Path(ctx["model_dir"]).parent / "memory", build_arithmetic_tokenizer(), **size)
    arch = Architecture.from_pretrained(model_dir)
    g = torch.Generator().manual_seed(2)
    half = tokens // 2
    prompts = [torch.randint(3, arch.vocab_size, (half,), generator=g).tolist() for _ in range(4)]
    samples = [[Sample(torch.randint(3, arch.vocab_size, (half,), generator=g).tolist(), [-1.0] * half, "stop")]
               for _ in prompts]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * len(prompts))

    def allocated() -> int:
        return torch.cuda.memory_allocated(device) if on_gpu else 0

    base = allocated()
    reserved = torch.cuda.memory_reserved(device) if on_gpu else 0
    spec = MegatronPolicy(dtype=dtype, micro_batch_tokens=tokens)  # one row per micro-batch
    worker = PolicyWorker(spec, str(model_dir), rank=0, world_size=1, master_addr="127.0.0.1",
                          master_port=free_port(), seed=0, with_reference=True)
    predicted = predicted_memory(arch, dtype, tokens, on_gpu=on_gpu, torch_adam=USING_PYTORCH_OPTIMIZER)
    measured = {}
    for phase in ("training", "logprobs"):
        if on_gpu:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        if phase == "training":
            worker.supervised_step(batch, lr=1e-5)
        else:
            worker.logprobs(batch)
        measured[phase] = (torch.cuda.max_memory_allocated(device) - base) if on_gpu else float("nan")
    worker.offload()
    measured["offloaded"] = allocated() - base if on_gpu else float("nan")
    cached = torch.cuda.memory_reserved(device) - reserved if on_gpu else 0  # the reference's blocks among them
    predicted["offloaded"] = 0
    params = shard_parameters(arch, 1) / 1e9
    print(f"    {params:.2f}B parameters, {dtype}, 4 x {tokens} tokens (local layers: the T x T scores are kept), "
          f"{'PyTorch AdamW' if USING_PYTORCH_OPTIMIZER else 'fused Adam'}")
    print(f"    {'phase':10} {'predicted GiB':>14} {'measured GiB':>13} {'ratio':>6}")
    for phase in predicted:
        ratio = measured[phase] / predicted[phase] if predicted[phase] and on_gpu else float("nan")
        print(f"    {phase:10} {predicted[phase] / GIB:14.2f} {measured[phase] / GIB:13.2f} {ratio:6.2f}")
    del worker
    if on_gpu:
        torch.cuda.empty_cache()
        low, high = 1 - MEMORY_PLAN_TOLERANCE, 1 + MEMORY_PLAN_TOLERANCE
        for phase in ("training", "logprobs"):
            assert predicted[phase] >= 20 * GIB, f"{phase}: the model fills {predicted[phase] / GIB:.1f} GiB"
            assert low <= measured[phase] / predicted[phase] <= high, \
                f"{phase}: the plan is off by more than {MEMORY_PLAN_TOLERANCE:.0%}"
        assert measured["offloaded"] < 0.05 * predicted["logprobs"], "offload left the state on the GPU"
        assert cached < 0.05 * predicted["logprobs"], f"offload left {cached / GIB:.2f} GiB in PyTorch's cache"


class Skip(Exception):
    pass


PARTS = [("workers", part_workers), ("hf_parity", part_hf_parity), ("offload", part_offload),
         ("recompute", part_recompute), ("ipc_refit", part_ipc_refit), ("memory_plan", part_memory_plan),
         ("vllm", part_vllm)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device visible (use --device cpu to check the script on a CPU)")
        return 2
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    started = time.perf_counter()
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (CPU check)"
    print(f"gpu_smoke: torch {torch.__version__}, device {gpu}")
    tokenizer = build_arithmetic_tokenizer()
    model_dir = str(create_tiny_model(Path(tempfile.mkdtemp(prefix="gpu-smoke-")) / "model", tokenizer,
                                      num_layers=2))
    dtype = "bfloat16" if args.device == "cuda" else "float32"
    policy, critic = build_workers(model_dir, dtype)
    ctx = dict(policy=policy, critic=critic, batch=rollout_batch(len(tokenizer)), device=device,
               model_dir=model_dir)
    print(f"  workers built on {policy.device}: {memory(device)}")
    verdicts = {}
    for name, part in PARTS:
        print(f"[{name}]")
        try:
            part(ctx)
            verdicts[name] = "PASS"
        except Skip as skip:
            verdicts[name] = f"SKIP ({skip})"
        except Exception as err:  # noqa: BLE001 - every part reports, the next one runs
            traceback.print_exc()
            verdicts[name] = f"FAIL ({type(err).__name__}: {err})"
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    print(f"gpu_smoke summary ({time.perf_counter() - started:.0f} s, {gpu}, {dtype}):")
    for name, verdict in verdicts.items():
        print(f"  {name:10} {verdict}")
    return 1 if any(v.startswith("FAIL") for v in verdicts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
