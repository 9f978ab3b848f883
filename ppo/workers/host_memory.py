"""Host memory (CPU RAM) of each node of a GPU job, per phase: the host half of the memory plan
(:mod:`ppo.workers.memory`).  Pure Python.

What a node's processes hold on the host, by phase (``HOST_PHASES``, the order of a run):

- ``Megatron start-up``: every policy and critic rank reads its own tensor-parallel shards of the HF checkpoint
  (safetensors reads slices, in the checkpoint's dtype) and converts them to Megatron's layout (a second copy) before
  they reach its GPU; the engines do not exist yet;
- ``engine start-up``: the Megatron ranks have offloaded (see ``generation``) and each vLLM worker loads its shard of
  the weights through host memory;
- ``generation``: the Megatron ranks are offloaded: parameters copied to pinned memory by Megatron's buffers
  (``param_data.cpu().pin_memory()``, kept for every later offload), Adam state and master weights to host memory,
  the policy's reference model (``PolicyWorker.offload``); gradients are freed, not moved;
- ``training`` (and the logprob/value passes): the Megatron ranks are back on their GPUs, the engines asleep
  (vLLM's level-1 sleep: weights in pinned host memory);
- ``refit``: the critic offloaded, the policy's Adam state and reference offloaded, its weights on the GPU.

Pinned memory is never given back once allocated: PyTorch's pinned allocator rounds every allocation up to a power
of two (``CachingHostAllocator``: ``PowerOf2Ceil`` under ``pinned_max_round_threshold``, unlimited by default) and keeps
freed blocks cached, so a sleeping engine's weight copies and Megatron's pinned parameters stay counted in every
phase after they first appear.  Every worker process also keeps :data:`HOST_PROCESS_BYTES` (Python, torch, CUDA,
NCCL), and every node Ray's daemons; node 0 also the driver.
"""

from __future__ import annotations

from collections import Counter

HOST_PHASES = ("Megatron start-up", "engine start-up", "generation", "training", "refit")
GIB = 1 << 30
HOST_PROCESS_BYTES = 4 * GIB
"""Host memory of a worker process besides the model state it offloads (Python, torch, CUDA and NCCL libraries,
vLLM's scheduler).  An assumption; verl reports ~11 GB a rollout process for a 7B model, weights included."""
NODE_DAEMON_BYTES = 2 * GIB
"""Ray's raylet, agents and (node 0) GCS on every node: an assumption, of the order Ray's own dashboards show."""


def pinned_bytes(size: int) -> int:
    """Bytes PyTorch's pinned allocator takes for a ``size``-byte tensor: the next power of two."""
    return 0 if size <= 0 else 1 << (size - 1).bit_length()


def megatron_rank_host(*, weights: int, optimizer: int, reference: int, checkpoint_shard: int) -> dict[str, dict]:
    """One Megatron rank's host bytes per phase (its process overhead counted elsewhere): ``weights`` its parameter
    bytes, ``optimizer`` its Adam state (master weights and moments), ``reference`` its reference model's bytes (0
    without one), ``checkpoint_shard`` the bytes of its shards as the checkpoint stores them."""
    pinned = pinned_bytes(weights)
    offloaded = {"weights (pinned)": pinned, "optimizer": optimizer, "reference": reference}
    return {
        "Megatron start-up": {"checkpoint shards": checkpoint_shard, "converted shards": weights},
        "engine start-up": offloaded,
        "generation": offloaded,
        "training": {"weights (pinned)": pinned},
        "refit": {"weights (pinned)": pinned, "optimizer": optimizer, "reference": reference},
    }


def engine_rank_host(*, tensor_bytes: list[int], checkpoint_shard: int) -> dict[str, dict]:
    """One vLLM worker's host bytes per phase: while loading, its shard as the checkpoint stores it; once it has slept,
    a pinned copy of each weight tensor (``tensor_bytes``), kept by PyTorch's pinned cache after every wake-up."""
    asleep = {"weights (pinned)": sum(pinned_bytes(size) * n for size, n in Counter(tensor_bytes).items())}
    return {"Megatron start-up": {}, "engine start-up": {"checkpoint shards": checkpoint_shard},
            "generation": asleep, "training": asleep, "refit": asleep}


def add_parts(into: dict[str, dict], role: str, parts: dict[str, dict], times: int = 1) -> None:
    """Add ``times`` × ``parts`` (phase -> part -> bytes) to a node's phases, each part named ``role part`` (or
    ``part`` without a role)."""
    for phase, named in parts.items():
        phase_parts = into.setdefault(phase, {})
        for part, size in named.items():
            if size:
                key = f"{role} {part}" if role else part
                phase_parts[key] = phase_parts.get(key, 0) + size * times


def process_parts(*, megatron: int, engine_ranks: int, engine_actors: int, driver: bool) -> dict[str, dict]:
    """Worker processes' own memory per phase: the Megatron ranks from the start, the engines' processes (their
    workers and, for an engine of TP > 1, the actor that holds its scheduler) once they start; Ray's daemons; the
    driver on node 0."""
    engines = (engine_ranks + engine_actors) * HOST_PROCESS_BYTES
    phases = {}
    for phase in HOST_PHASES:
        parts = {"Megatron processes": megatron * HOST_PROCESS_BYTES,
                 "engine processes": 0 if phase == "Megatron start-up" else engines,
                 "Ray daemons": NODE_DAEMON_BYTES, "driver": HOST_PROCESS_BYTES if driver else 0}
        phases[phase] = {k: v for k, v in parts.items() if v}
    return phases
