"""Refit without the driver: the policy ranks stream HF-named weights to the vLLM engines' workers in buckets.

Which engine worker (tensor-parallel rank) hears from which policy rank, and how, comes from the placement plan
(:meth:`ppo.cluster.plan.PlacementPlan.refit_routes`):

- ``ipc``: the worker shares a GPU with a policy rank that assembles the full weights (a tensor-parallel rank 0).
  The sender packs a bucket into one flat buffer on its device and hands the worker an IPC handle: CUDA IPC on GPUs;
  on CPU the same code path with a shared-memory buffer (torch's ``file_system`` sharing), so it is exercised here.
- ``broadcast``: every other worker joins a torch.distributed group with policy rank 0 (NCCL on GPUs, gloo on CPU),
  made on policy rank 0's node outside the workers' own worlds (a ``TCPStore`` plus a process group of its own),
  and receives each bucket by broadcast.

Engines of every size take the same path: the engine's actor forwards each bucket's metadata and its workers' IPC
handles to its vLLM workers (``collective_rpc``: the engine's own process at TP 1, worker processes or Ray actors at
TP > 1), and each worker opens its handle or receives the broadcast itself, then reloads the bucket on its device.

The driver (:class:`Refitter`) only sends small calls and bucket metadata (names, dtypes, shapes, offsets); handles
travel from sender to engine as Ray object references that the driver never fetches.  Its stats measure both
bypasses: ``refit_driver_bytes`` is the pickled size of everything the driver received during a refit, and
``refit_host_bytes`` the weight bytes the engines serialised into messages to their workers (0 on this path;
the tools' whole-weights refit counts there).
"""

from __future__ import annotations

import pickle
import time

from ppo.cluster.deadline import Pending
from ppo.cluster.plan import RefitRoute
from ppo.workers.buckets import bucket_size
from ppo.workers.group import PolicyGroup


class Refitter:
    """The driver's side of a refit: tells the policy ranks and the engines what to send and receive, per bucket.
    Every call goes through the policy group or the engine pool, and every wait has their deadline (a hung broadcast
    fails the run naming who did not answer)."""

    def __init__(self, policy: PolicyGroup, engines, routes: list[RefitRoute], bucket_bytes: int):
        """``engines``: a :class:`ppo.rollout.generation.EnginePool` (not imported: the rollout package imports this
        one's)."""
        self.policy = policy
        self.engines = engines
        self.routes = routes
        self.bucket_bytes = bucket_bytes
        self.by_engine: dict[int, list[RefitRoute]] = {}
        for route in routes:
            self.by_engine.setdefault(route.engine, []).append(route)
        broadcast = [r for r in routes if r.transport == "broadcast"]
        self.broadcasts = bool(broadcast)
        if broadcast:
            host, port = policy.refit_address()
            world = 1 + len(broadcast)
            group_ranks: dict[int, dict[int, int]] = {}
            for rank, route in enumerate(broadcast, start=1):
                group_ranks.setdefault(route.engine, {})[route.worker] = rank
            joins = [policy.join_refit_group_async(host, port, 0, world)]
            joins += [engines.join_refit_group_async(host, port, ranks, world, engines=[e])
                      for e, ranks in group_ranks.items()]
            Pending.join(joins, "'join_refit_group'").wait()

    @property
    def senders(self) -> list[int]:
        return sorted({0} | {r.sender for r in self.routes if r.transport == "ipc"})

    def __call__(self) -> dict[str, float]:
        started = time.perf_counter()
        buckets = self.policy.prepare_refit(self.senders, self.bucket_bytes)
        driver_bytes = len(pickle.dumps(buckets))
        for i, bucket in enumerate(buckets):
            work = [self.policy.stage_refit_bucket_async(i)]  # every rank: the TP gather of this bucket only
            handles = {}  # sender → its handle, an object reference that goes to the engines, never the driver
            for engine, routes in self.by_engine.items():
                ipc = [r for r in routes if r.transport == "ipc"]
                for r in ipc:
                    if r.sender not in handles:
                        (handles[r.sender],) = self.policy.refit_handle_async(i, on_rank=r.sender).refs
                work.append(self.engines.load_bucket_async(bucket, [r.worker for r in ipc],
                                                           *(handles[r.sender] for r in ipc), engines=[engine]))
            if self.broadcasts:
                work.append(self.policy.broadcast_bucket_async(i))
            done = Pending.join(work, f"bucket {i} of the refit").wait()
            driver_bytes += len(pickle.dumps(done))
        engines_done = self.engines.finish_refit_async()
        done = Pending.join([engines_done, self.policy.finish_refit_async()], "'finish_refit'").wait()
        driver_bytes += len(pickle.dumps(done))
        host_bytes = sum(done[: len(engines_done.refs)])
        weight_bytes = sum(bucket_size(b) for b in buckets)
        return {"refit_seconds": time.perf_counter() - started, "refit_bytes": float(weight_bytes),
                "refit_buckets": float(len(buckets)), "refit_driver_bytes": float(driver_bytes),
                "refit_host_bytes": float(host_bytes)}
