"""Refit without the driver: the policy ranks stream HF-named weights to the vLLM engines in buckets.

Which engine hears from which policy rank, and how, comes from the placement plan
(:meth:`ppo.workers.plan.PlacementPlan.refit_routes`):

- ``ipc``: the engine shares a GPU with a policy rank that assembles the full weights (a tensor-parallel rank 0).
  The sender packs a bucket into one flat buffer on its device and hands the engine an IPC handle: CUDA IPC on GPUs;
  on CPU the same code path with a shared-memory buffer (torch's ``file_system`` sharing), so it is exercised here.
- ``broadcast``: every other engine joins a torch.distributed group with policy rank 0 (NCCL on GPUs, gloo on CPU),
  made on policy rank 0's node outside the workers' own worlds (a ``TCPStore`` plus a process group of its own),
  and receives each bucket by broadcast.

The driver (:class:`Refitter`) only sends small calls and bucket metadata (names, dtypes, shapes, offsets); handles
travel from sender to engine as Ray object references that the driver never fetches.  ``driver_bytes`` in its
stats is the pickled size of everything the driver received during a refit, so tests can check no weights passed it.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from datetime import timedelta

import ray
import torch

from ppo.workers.plan import RefitRoute

REFIT_GROUP_TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class TensorEntry:
    """Where a tensor sits in a bucket's flat byte buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def plan_buckets(state: dict[str, torch.Tensor], bucket_bytes: int) -> list[list[TensorEntry]]:
    """Split ``state`` (in its order) into buckets of at most ``bucket_bytes`` (a bigger tensor gets its own)."""
    buckets: list[list[TensorEntry]] = [[]]
    used = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if buckets[-1] and used + nbytes > bucket_bytes:
            buckets.append([])
            used = 0
        buckets[-1].append(TensorEntry(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), used,
                                       nbytes))
        used += nbytes
    return [b for b in buckets if b]


def bucket_size(bucket: list[TensorEntry]) -> int:
    return bucket[-1].offset + bucket[-1].nbytes if bucket else 0


def pack(state: dict[str, torch.Tensor], bucket: list[TensorEntry], device: torch.device) -> torch.Tensor:
    """One flat ``uint8`` buffer holding the bucket's tensors (shared memory on CPU, so it can be handed over)."""
    buffer = torch.empty(bucket_size(bucket), dtype=torch.uint8, device=device)
    if buffer.device.type == "cpu":
        buffer.share_memory_()  # before filling it: sharing a filled buffer would copy it once more
    for entry in bucket:
        tensor = state[entry.name].detach().contiguous()
        buffer[entry.offset : entry.offset + entry.nbytes].copy_(tensor.reshape(-1).view(torch.uint8))
    return buffer


def unpack(buffer: torch.Tensor, bucket: list[TensorEntry]) -> dict[str, torch.Tensor]:
    """Views of ``buffer`` as the bucket's named tensors (no copy)."""
    return {e.name: buffer[e.offset : e.offset + e.nbytes].view(getattr(torch, e.dtype)).view(e.shape)
            for e in bucket}


def ipc_handle(buffer: torch.Tensor) -> bytes:
    """A handle another process on the same device opens without copying (CUDA IPC, or CPU shared memory)."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing as mp

    if buffer.device.type == "cpu":
        mp.set_sharing_strategy("file_system")  # a named shared-memory file: any local process can open it
    return bytes(ForkingPickler.dumps(buffer))


def open_ipc_handle(handle: bytes) -> torch.Tensor:
    import torch.multiprocessing  # noqa: F401 - registers the tensor reductions the handle refers to

    return pickle.loads(handle)


class RefitGroup:
    """A torch.distributed group of its own between policy rank 0 (rank 0 here) and the broadcast engines."""

    def __init__(self, host: str, port: int, rank: int, world_size: int):
        store = torch.distributed.TCPStore(host, port, world_size, rank == 0, timeout=REFIT_GROUP_TIMEOUT)
        prefixed = torch.distributed.PrefixStore("ppo-refit", store)
        if torch.cuda.is_available():
            self.group = torch.distributed.ProcessGroupNCCL(prefixed, rank, world_size)
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.group = torch.distributed.ProcessGroupGloo(prefixed, rank, world_size, REFIT_GROUP_TIMEOUT)
            self.device = torch.device("cpu")
        self.store = store  # the store must outlive the group

    def broadcast(self, buffer: torch.Tensor) -> None:
        options = torch.distributed.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        self.group.broadcast([buffer], options).wait()


class Refitter:
    """The driver's side of a refit: tells the policy ranks and the engines what to send and receive, per bucket."""

    def __init__(self, policy, engines: list, routes: list[RefitRoute], bucket_bytes: int):
        self.policy = policy
        self.engines = engines
        self.routes = routes
        self.bucket_bytes = bucket_bytes
        self.broadcast_engines = [r.engine for r in routes if r.transport == "broadcast"]
        if self.broadcast_engines:
            host, port = ray.get(policy.actors[0].refit_address.remote())
            world = 1 + len(self.broadcast_engines)
            joins = [policy.actors[0].join_refit_group.remote(host, port, 0, world)]
            joins += [engines[e].join_refit_group.remote(host, port, i + 1, world)
                      for i, e in enumerate(self.broadcast_engines)]
            ray.get(joins)

    @property
    def senders(self) -> list[int]:
        return sorted({0} | {r.sender for r in self.routes if r.transport == "ipc"})

    def __call__(self) -> dict[str, float]:
        started = time.perf_counter()
        buckets = self.policy.prepare_refit(self.senders, self.bucket_bytes)
        driver_bytes = len(pickle.dumps(buckets))
        for i, bucket in enumerate(buckets):
            work = []
            for route in self.routes:
                if route.transport == "ipc":
                    handle = self.policy.actors[route.sender].refit_handle.remote(i)
                    work.append(self.engines[route.engine].load_ipc.remote(handle, bucket))
            if self.broadcast_engines:
                work.append(self.policy.actors[0].broadcast_bucket.remote(i))
                work += [self.engines[e].load_broadcast.remote(bucket) for e in self.broadcast_engines]
            done = ray.get(work)
            driver_bytes += len(pickle.dumps(done))
        done = ray.get([engine.finish_refit.remote() for engine in self.engines] + self.policy.finish_refit_async())
        driver_bytes += len(pickle.dumps(done))
        weight_bytes = sum(bucket_size(b) for b in buckets)
        return {"refit_seconds": time.perf_counter() - started, "refit_bytes": float(weight_bytes),
                "refit_buckets": float(len(buckets)), "refit_driver_bytes": float(driver_bytes)}
