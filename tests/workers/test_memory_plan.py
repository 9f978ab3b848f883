"""The memory plan (``ppo/workers/memory.py``): its exact parts against the real objects, and what it refuses.

Parameters, gradient buffers and optimizer state are counted from a Megatron model that ``ModelUpdater`` has stepped
once (TP 1 and TP 2, fp32 and bf16, the distributed optimizer over 2 data-parallel ranks), in processes of their own
(gloo); the vLLM KV cache from the engine's own block count (``tests/rollout``'s engine); an engine's weight
tensors (what its sleep pins) from ``transformers``' model with q/k/v and gate/up merged.  The dry-run lines are
checked on the recipes as a user runs them: ``dsr1_7b`` keeps a 16 GiB margin, and a node too small for its host
memory is refused.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.cluster.plan import EngineLayout, GroupLayout, plan_placement
from ppo.cluster.ports import free_port
from ppo.launch.executors import LocalExecutor, machine_memory_gib
from ppo.launch.prepare import Request, prepare
from ppo.models.architecture import Architecture
from ppo.workers.host_memory import HOST_PROCESS_BYTES, NODE_DAEMON_BYTES, pinned_bytes
from ppo.workers.memory import (
    CUDA_CONTEXT_BYTES,
    GIB,
    NCCL_COMMUNICATOR_BYTES,
    EngineMemory,
    GroupMemory,
    MemoryPlanError,
    engine_tensor_bytes,
    kv_bytes_per_token,
    model_state_bytes,
    plan_memory,
    shard_parameters,
)
from tests.launch.conftest import run_launch

ROOT = Path(__file__).resolve().parents[2]

TINY = {"model_type": "qwen2", "vocab_size": 96, "hidden_size": 128, "intermediate_size": 192,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 64}


def measured(tmp_path: Path, kind: str, dtype: str, *, tensor: int, world: int, distributed: bool) -> list[dict]:
    """What each rank of a ``world``-process group at TP ``tensor`` really holds after one step."""
    port, out = free_port(), tmp_path / f"{kind}-{dtype}-{tensor}-{world}.json"
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.workers.memory_worker", json.dumps(TINY), kind, dtype, str(tensor),
             "1" if distributed else "0", str(out)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(log[-3000:] for log in logs)
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind, dtype, tensor, world, distributed", [
    ("policy", "float32", 1, 2, True),  # fp32 (no master copy), the optimizer state divided over 2 DP ranks
    ("policy", "bfloat16", 2, 2, False),
    ("critic", "bfloat16", 2, 2, False),
])
def test_the_plan_counts_what_megatron_allocates(tmp_path, kind, dtype, tensor, world, distributed):
    arch = Architecture.from_hf_config(TINY)
    params = shard_parameters(arch, tensor, value_head=kind == "critic")
    expected = model_state_bytes(params, dtype, data=world // tensor, distributed=distributed)
    for rank in measured(tmp_path, kind, dtype, tensor=tensor, world=world, distributed=distributed):
        assert rank["parameters"] == params, rank
        assert {k: rank[k] for k in expected} == expected, rank


def test_the_kv_cache_is_what_vllm_makes_of_its_bytes():
    """vLLM's page: block_size × kv heads per rank × (key + value head size) × dtype bytes per layer
    (``vllm/v1/kv_cache_interface.py``); its blocks from ``kv_cache_memory_bytes``."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    arch = Architecture.from_hf_config(TINY | {"num_hidden_layers": 3})
    import torch

    for tensor in (1, 2, 4):  # 4 exceeds the model's 2 KV heads: vLLM replicates them
        engine = EngineMemory(tensor=tensor, dtype="bfloat16", gpu_memory_utilization=0.5, kv_cache_bytes=None,
                              max_model_len=64)
        spec = FullAttentionSpec(block_size=16, num_kv_heads=max(1, arch.num_key_value_heads // tensor),
                                 head_size=arch.head_dim, dtype=torch.bfloat16)
        assert kv_bytes_per_token(arch, engine) == arch.num_layers * spec.page_size_bytes // spec.block_size


def small_plan(**engine_overrides):
    """2 policy ranks and 2 engines on one node of 2 GPUs of 4 GiB."""
    arch = Architecture.from_hf_config(TINY)
    placement = plan_placement(nodes=1, gpus_per_node=2, groups=[GroupLayout("policy", data=2)],
                               generation=EngineLayout(engines=2))
    group = GroupMemory(name="policy", tensor=1, data=2, dtype="bfloat16", distributed_optimizer=True,
                        micro_batch_tokens=64)
    engine = EngineMemory(**({"tensor": 1, "dtype": "bfloat16", "gpu_memory_utilization": 0.5,
                              "kv_cache_bytes": None, "max_model_len": 64} | engine_overrides))
    return plan_memory(placement, arch, [group], engine, gpu_memory_gib=4.0, source="the test")


def test_the_engine_takes_its_budget_and_the_kv_cache_what_is_left():
    """vLLM's rule: the engine's process (its context included) takes gpu_memory_utilization × the GPU."""
    arch = Architecture.from_hf_config(TINY)
    plan = small_plan()
    generation = plan.gpus[0].phases["generation"]
    assert sum(v for k, v in generation.items() if k.startswith("engine ")) + CUDA_CONTEXT_BYTES == 2 * GIB
    assert generation["engine weights"] == shard_parameters(arch, 1) * 2
    per_token = kv_bytes_per_token(arch, EngineMemory(1, "bfloat16", 0.5, None, 64))
    assert plan.kv_tokens == generation["engine KV cache"] // per_token
    given = small_plan(kv_cache_bytes=64 << 20).gpus[0].phases["generation"]
    assert given["engine KV cache"] == 64 << 20


def test_an_engine_whose_kv_cache_cannot_hold_one_sequence_is_refused():
    with pytest.raises(MemoryPlanError, match="generation.max_model_len=1000000"):
        small_plan(max_model_len=1_000_000)


def test_the_refit_holds_the_policy_weights_and_the_engine_weights_but_no_kv_cache():
    refit = small_plan().gpus[0].phases["refit"]
    assert {"policy weights", "engine weights"} <= set(refit)
    assert not {"engine KV cache", "policy gradients", "policy optimizer"} & set(refit)


def recipe_plan(recipe: str, *overrides: str):
    return prepare(Request(f"experiments/{recipe}.py", list(overrides), dry_run=True)).experiment.memory_plan()


def test_dsr1_7b_keeps_a_16_gib_margin_with_every_residual_counted(monkeypatch):
    """Issue 34: the residuals (each process's context, NCCL communicators, a broadcast receiver's bucket) counted,
    the fullest GPU of dsr1_7b still needs at most 64 GiB of its 80."""
    monkeypatch.chdir(ROOT)
    plan = recipe_plan("dsr1_7b")
    used, phase, slot = plan.peak()
    parts = next(g for g in plan.gpus if g.slot == slot).phases[phase]
    assert {"CUDA contexts", "NCCL communicators"} <= set(parts), parts
    assert used <= 64 * GIB, plan.peak_line()


def engine_plan(engine_tensor: int):
    """1 node of 4 GPUs of 16 GiB: a policy of TP 2 × DP 2, engines of TP ``engine_tensor`` on every GPU."""
    arch = Architecture.from_hf_config(TINY)
    placement = plan_placement(nodes=1, gpus_per_node=4, groups=[GroupLayout("policy", tensor=2, data=2)],
                               generation=EngineLayout(engines=4 // engine_tensor, tensor=engine_tensor))
    group = GroupMemory(name="policy", tensor=2, data=2, dtype="bfloat16", distributed_optimizer=True,
                        micro_batch_tokens=64)
    engine = EngineMemory(tensor=engine_tensor, dtype="bfloat16", gpu_memory_utilization=0.5, kv_cache_bytes=None,
                          max_model_len=64)
    return plan_memory(placement, arch, [group], engine, gpu_memory_gib=16.0, source="the test",
                       host_memory_gib=64.0), placement


def test_an_engine_actor_and_nccl_communicators_are_counted_on_their_gpus():
    """A TP-2 engine's actor holds a context on the engine's first GPU; every GPU holds the policy's TP and DP
    communicators, its engine rank's TP communicator (TP > 1) and, where it takes part in the refit's broadcast (a
    receiver: no policy rank 0 of a TP group on its GPU; or policy rank 0, the sender), that group's and a receiver
    its bucket buffer."""
    for engine_tensor in (1, 2):
        plan, placement = engine_plan(engine_tensor)
        receivers = {placement.engine_slots(r.engine)[getattr(r, "worker", 0)] for r in placement.refit_routes()
                     if r.transport == "broadcast"}
        members = receivers | ({placement.ranks["policy"][0]} if receivers else set())
        assert receivers, "the layout must exercise the broadcast"
        for gpu in plan.gpus:
            slot = next(s for s in placement.ranks["policy"] if f"node{s.node}/gpu{s.gpu}" == gpu.slot)
            actor = engine_tensor > 1 and any(placement.engine_slots(e)[0] == slot
                                              for e in range(placement.num_engines))
            for phase in ("generation", "training"):
                parts = gpu.phases[phase]
                assert parts["CUDA contexts"] == CUDA_CONTEXT_BYTES * (2 + actor), (gpu.slot, parts)
                assert parts["NCCL communicators"] == NCCL_COMMUNICATOR_BYTES * (
                    2 + (engine_tensor > 1) + (slot in members)), (engine_tensor, gpu.slot, parts)
                assert ("refit receiving buffer" in parts) == (slot in receivers), (gpu.slot, parts)
        if engine_tensor > 1:
            assert any(g.phases["generation"]["CUDA contexts"] == 3 * CUDA_CONTEXT_BYTES for g in plan.gpus)


@pytest.mark.slow
def test_an_engines_pinned_weights_are_its_tensors_as_vllm_merges_them():
    """The tensors a sleeping engine copies to pinned memory: transformers' parameters with q/k/v and gate/up merged
    (vLLM's QKVParallelLinear and MergedColumnParallelLinear), each rounded up to a power of two."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**TINY)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    sizes: dict[str, int] = {}
    for name, param in model.named_parameters():
        merged = re.sub(r"\.(q|k|v)_proj\.", ".qkv_proj.", re.sub(r"\.(gate|up)_proj\.", ".gate_up_proj.", name))
        sizes[merged] = sizes.get(merged, 0) + param.numel() * param.element_size()
    engine = EngineMemory(tensor=1, dtype="bfloat16", gpu_memory_utilization=0.5, kv_cache_bytes=None,
                          max_model_len=64)
    assert sorted(engine_tensor_bytes(Architecture.from_hf_config(TINY), engine)) == sorted(sizes.values())
    assert [pinned_bytes(n) for n in (1, 2, 3, 1000, 1 << 20, (1 << 20) + 1)] == [1, 2, 4, 1024, 1 << 20, 2 << 20]


def test_each_rank_reads_only_its_shards_at_start_up():
    """Start-up: the TP ranks of a group together read the checkpoint once (plus their replicated norms), each
    converting its shards into a copy of the same size; the host plan adds a process per rank and Ray's daemons."""
    arch = Architecture.from_hf_config(TINY)
    plan, placement = engine_plan(2)
    startup = plan.host_nodes["node0"]["Megatron start-up"]
    whole = shard_parameters(arch, 1) * 2
    per_rank = shard_parameters(arch, 2) * 2
    assert startup["policy checkpoint shards"] == startup["policy converted shards"] == 4 * per_rank
    assert whole <= 2 * per_rank <= whole + 2 * arch.num_layers * 2 * arch.hidden_size * 2 + 2 * arch.hidden_size * 2
    assert startup["Megatron processes"] == 4 * HOST_PROCESS_BYTES and "engine processes" not in startup
    assert startup["Ray daemons"] == NODE_DAEMON_BYTES
    engines = plan.host_nodes["node0"]["engine start-up"]
    assert engines["engine processes"] == (4 + 2) * HOST_PROCESS_BYTES  # 4 workers and 2 engine actors
    assert engines["engine checkpoint shards"] == 4 * shard_parameters(arch, 2) * 2


def test_the_host_plan_refuses_a_node_too_small_in_one_line():
    plan, _ = engine_plan(2)
    used, phase, node = plan.host_peak()
    assert plan.host_line() == f"host memory: {used / GIB:.1f} GiB of 64 GiB ({phase}, {node})"
    plan.check()  # the GPUs fit, and so does the node
    plan.host_limit = used - 1
    with pytest.raises(MemoryPlanError, match=f"the {phase} phase needs .* of host memory on node0, more than "
                                              f"executor.host_memory_gib="):
        plan.check()


@pytest.mark.slow
def test_the_dry_run_prints_the_host_line_and_refuses_a_node_below_it():
    rc, out, err = run_launch("experiments/dsr1_7b.py", "--executor", "slurm", "--dry-run")
    assert rc == 0, err
    line = re.search(r"^host memory: ([0-9.]+) GiB of 1024 GiB \((.+), (node\d+)\)$", out, re.M)
    assert line, out
    need = float(line[1])
    rc, out, err = run_launch("experiments/dsr1_7b.py", "--executor", "slurm", "--dry-run",
                              f"executor.host_memory_gib={int(need) - 1}")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, (rc, out, err)
    assert f"memory: the {line[2]} phase needs {need:.1f} GiB of host memory on {line[3]}" in err, err
    assert f"executor.host_memory_gib={int(need) - 1}" in err, err


def test_a_local_run_is_checked_against_this_machines_memory_where_it_has_gpus(monkeypatch):
    monkeypatch.setattr("ppo.launch.executors.machine_gpus", lambda: 8)
    assert LocalExecutor().node_memory_gib == machine_memory_gib() > 0
    assert LocalExecutor(host_memory_gib=512).node_memory_gib == 512
    monkeypatch.setattr("ppo.launch.executors.machine_gpus", lambda: 0)
    assert LocalExecutor().node_memory_gib is None  # logical GPUs: CPU processes, not what the plan describes
