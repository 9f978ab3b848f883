"""The generation workers: Ray actors that each own one vLLM engine in their own process, and the pool of them.

A step's prompts are sharded over the engines (:class:`EnginePool`): engine *k* gets a contiguous slice and
generates it with the per-request seeds the whole batch would have had (prompt *i* of the batch always uses
``seed + i·n``), so the samples do not depend on how many engines there are.  Weights arrive from the policy ranks
(:mod:`ppo.workers.refit`, :mod:`ppo.workers.buckets`), never through the driver.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import ray

from ppo.cluster.deadline import Pending, get_within
from ppo.rollout.settings import SamplingConfig, VLLMGeneration
from ppo.workers.logs import redirect_output, worker_log
from ppo.workers.traffic import send

START_TIMEOUT_S = 1800.0
"""How long a tool's or test's engine (:func:`spawn_generation_worker`) may take to be scheduled and built; the
trainer uses ``trainer.start_timeout_s``."""


class GenerationWorker:
    """Builds the engine inside the actor's process (never in the driver) and serves generate / refit / sleep."""

    def __init__(self, cfg: VLLMGeneration, index: int = 0, log_file: str | None = None):
        redirect_output(log_file)
        self.index = index
        self.started_at = time.time()  # where engines share GPUs, after the Megatron ranks offloaded (placement.json)
        from ppo.rollout.vllm_engine import VLLMEngine  # torch and vLLM in the actor's process, never the driver's

        self.engine = VLLMEngine(cfg)
        self.tokenizer = self.engine.tokenizer

    def generate(self, prompts: list[list[int]], sampling: SamplingConfig | None = None, seed: int | None = None,
                 first_index: int = 0):
        return self.engine.generate(prompts, sampling, seed, first_index=first_index)

    def refit(self, weights: dict) -> dict[str, float]:
        """Load weights sent as a whole (tests and tools; the trainer streams buckets from the policy ranks).  They
        came through Ray by value, so they count as host bytes."""
        stats = self.engine.refit(weights.items())
        stats["refit_host_bytes"] += sum(t.numel() * t.element_size() for t in weights.values())
        return stats

    def join_refit_group(self, host: str, port: int, group_ranks: dict[int, int], world_size: int) -> None:
        """The engine's workers named in ``group_ranks`` (worker rank → group rank) join the refit group."""
        self.engine.join_refit_group(host, port, group_ranks, world_size)

    def load_bucket(self, bucket: list, ipc_workers: list[int], *handles: bytes) -> None:
        """Refit bucket into every worker of the engine: worker ``ipc_workers[i]`` opens ``handles[i]``, shared by
        the policy rank on its GPU (CUDA IPC, or CPU shared memory); the others receive the refit group's broadcast.
        (Handles come as top-level arguments: Ray resolves those object references here, never in the driver.)"""
        self.engine.load_bucket(bucket, dict(zip(ipc_workers, handles, strict=True)))

    def finish_refit(self) -> int:
        """Returns the weight bytes that passed through the host's messages in this refit (0 on the streamed path)."""
        return self.engine.finish_refit()

    def sleep(self) -> None:
        self.engine.sleep()

    def wake_up(self, tags: tuple[str, ...] | None = None) -> None:
        self.engine.wake_up(tags)

    def placement_info(self) -> dict:
        """Where the engine's actor runs, and each of its tensor-parallel workers (``workers``, read from inside)."""
        return {"engine": self.index, "node_ip": ray.util.get_node_ip_address(), "gpu_ids": ray.get_gpu_ids(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
                "started_at": self.started_at, "omp_threads": os.environ.get("OMP_NUM_THREADS"),
                "mkl_threads": os.environ.get("MKL_NUM_THREADS"), "workers": self.engine.placement()}

    def ready(self) -> bool:
        return True


def spawn_generation_worker(cfg: VLLMGeneration, index: int = 0, **options):
    """Start a ``GenerationWorker`` actor (``options``: Ray actor options, default one CPU) and wait until its engine
    is up (errors surface here, not later)."""
    actor = start_generation_worker(cfg, index, **options)
    get_within([actor.ready.remote()], START_TIMEOUT_S, [f"engine {index}"], "its start")
    return actor


def start_generation_worker(cfg: VLLMGeneration, index: int = 0, log_dir: str | None = None, **options):
    """Start engine ``index`` (``log_dir``: where its output goes, see :mod:`ppo.workers.logs`)."""
    options = {"num_cpus": 1, "num_gpus": 0, **options}
    return ray.remote(GenerationWorker).options(**options).remote(cfg, index, worker_log(log_dir, "engine", index))


def shard_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, end)`` slices of ``count`` items over ``shards``, sizes differing by at most one."""
    base, extra = divmod(count, shards)
    bounds, start = [], 0
    for k in range(shards):
        end = start + base + (k < extra)
        bounds.append((start, end))
        start = end
    return bounds


class EnginePool:
    """The run's engines as one façade: sharded generation, sleep / wake, and the refit's calls, on all of them or on
    ``engines``.  Each method calls the :class:`GenerationWorker` method of the same name and signature (``_async``:
    started, a :class:`ppo.cluster.deadline.Pending`; ``tests/workers/test_facades.py`` holds them to it)."""

    def __init__(self, actors: list, timeout_s: float | None = None, shipper=None):
        """``timeout_s``: how long a call may take on any engine (the trainer's ``trainer.start_timeout_s`` until the
        engines are :meth:`ready`, then ``trainer.worker_timeout_s``).  ``shipper``: a
        :class:`ppo.workers.traffic.Shipper` that counts what the driver sends the engines."""
        self.actors = actors
        self.timeout_s = timeout_s
        self.shipper = shipper

    def call_async(self, method: Callable, *args, engines: list[int] | None = None, **kwargs) -> Pending:
        """Start ``method`` (a function of the engines' class, never its name) on every engine (or on ``engines``),
        arguments by value."""
        chosen = range(len(self.actors)) if engines is None else engines
        refs = [send(getattr(self.actors[e], method.__name__), args, kwargs, self.shipper) for e in chosen]
        return Pending(refs, [f"engine {e}" for e in chosen], f"'{method.__name__}'", self.timeout_s)

    def __len__(self) -> int:
        return len(self.actors)

    def generate(self, prompts: list[list[int]], sampling: SamplingConfig | None = None,
                 seed: int | None = None) -> list:
        """Samples for ``prompts`` in prompt order; engine *k* generates the *k*-th contiguous slice (with
        ``first_index`` its start, so the per-request seeds are the whole batch's)."""
        bounds = [(a, b) for a, b in shard_bounds(len(prompts), len(self.actors)) if b > a]
        parts = [self.generate_async(prompts[a:b], sampling, seed, first_index=a, engines=[engine])
                 for engine, (a, b) in enumerate(bounds)]
        return [group for part in Pending.join(parts, "'generate'").wait() for group in part]

    def generate_async(self, prompts: list[list[int]], sampling: SamplingConfig | None = None, seed: int | None = None,
                       first_index: int = 0, *, engines: list[int] | None = None) -> Pending:
        return self.call_async(GenerationWorker.generate, prompts, sampling, seed, first_index=first_index,
                               engines=engines)

    def sleep(self) -> None:
        self.call_async(GenerationWorker.sleep).wait()

    def wake_up(self, tags: tuple[str, ...] | None = None) -> None:
        """Wake every engine (``tags``: only that memory, see :meth:`ppo.rollout.vllm_engine.VLLMEngine.wake_up`)."""
        self.call_async(GenerationWorker.wake_up, tags).wait()

    def ready(self) -> None:
        """Wait until every engine has started (an engine whose workers Ray cannot schedule would hang here)."""
        self.call_async(GenerationWorker.ready).wait()

    def placement_info(self) -> list[dict]:
        """Where each engine reports it runs, in engine order."""
        return self.call_async(GenerationWorker.placement_info).wait()

    # the refit (ppo.workers.refit.Refitter drives these)
    def join_refit_group_async(self, host: str, port: int, group_ranks: dict[int, int], world_size: int, *,
                               engines: list[int] | None = None) -> Pending:
        return self.call_async(GenerationWorker.join_refit_group, host, port, group_ranks, world_size,
                               engines=engines)

    def load_bucket_async(self, bucket: list, ipc_workers: list[int], *handles: bytes,
                          engines: list[int] | None = None) -> Pending:
        return self.call_async(GenerationWorker.load_bucket, bucket, ipc_workers, *handles, engines=engines)

    def finish_refit_async(self) -> Pending:
        """``.wait()`` gives each engine's weight bytes that went through the host's messages in this refit."""
        return self.call_async(GenerationWorker.finish_refit)

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
