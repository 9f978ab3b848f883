"""Refit without the driver: the policy ranks stream HF-named weights to the vLLM engines in buckets.

Which engine hears from which policy rank, and how, comes from the placement plan
(:meth:`ppo.cluster.plan.PlacementPlan.refit_routes`):

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

from ppo.cluster.deadline import Pending
from ppo.cluster.plan import RefitRoute
from ppo.workers.buckets import bucket_size


class Refitter:
    """The driver's side of a refit: tells the policy ranks and the engines what to send and receive, per bucket.
    Every call goes through the policy group or the engine pool, and every wait has their deadline (a hung broadcast
    fails the run naming who did not answer)."""

    def __init__(self, policy, engines, routes: list[RefitRoute], bucket_bytes: int):
        """``policy``: a :class:`ppo.workers.group.PolicyGroup`; ``engines``: a
        :class:`ppo.rollout.generation.EnginePool`."""
        self.policy = policy
        self.engines = engines
        self.routes = routes
        self.bucket_bytes = bucket_bytes
        self.broadcast_engines = [r.engine for r in routes if r.transport == "broadcast"]
        if self.broadcast_engines:
            host, port = policy.call_rank_async(0, "refit_address").first()
            world = 1 + len(self.broadcast_engines)
            joins = [policy.call_rank_async(0, "join_refit_group", host, port, 0, world)]
            joins += [engines.call_async("join_refit_group", host, port, i + 1, world, engines=[e])
                      for i, e in enumerate(self.broadcast_engines)]
            Pending.join(joins, "'join_refit_group'").wait()

    @property
    def senders(self) -> list[int]:
        return sorted({0} | {r.sender for r in self.routes if r.transport == "ipc"})

    def __call__(self) -> dict[str, float]:
        started = time.perf_counter()
        buckets = self.policy.prepare_refit(self.senders, self.bucket_bytes)
        driver_bytes = len(pickle.dumps(buckets))
        for i, bucket in enumerate(buckets):
            work = [self.policy.call_async("stage_refit_bucket", i)]  # every rank: the TP gather of this bucket only
            for route in self.routes:
                if route.transport == "ipc":
                    # the handle goes from the sender to its engine as an object reference the driver never fetches
                    (handle,) = self.policy.call_rank_async(route.sender, "refit_handle", i).refs
                    work.append(self.engines.call_async("load_ipc", handle, bucket, engines=[route.engine]))
            if self.broadcast_engines:
                work.append(self.policy.call_rank_async(0, "broadcast_bucket", i))
                work.append(self.engines.call_async("load_broadcast", bucket, engines=self.broadcast_engines))
            done = Pending.join(work, f"bucket {i} of the refit").wait()
            driver_bytes += len(pickle.dumps(done))
        done = Pending.join([self.engines.call_async("finish_refit"), self.policy.finish_refit_async()],
                            "'finish_refit'").wait()
        driver_bytes += len(pickle.dumps(done))
        weight_bytes = sum(bucket_size(b) for b in buckets)
        return {"refit_seconds": time.perf_counter() - started, "refit_bytes": float(weight_bytes),
                "refit_buckets": float(len(buckets)), "refit_driver_bytes": float(driver_bytes)}
