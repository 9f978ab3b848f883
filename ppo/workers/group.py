"""A worker group: ``world_size`` Ray actors that together hold one model (its own torch.distributed world).

Calls go to every rank (the collectives inside need all of them); rank 0's answer is returned.  A crashed
actor surfaces as an exception from ``call`` — the run ends with that error instead of hanging.
"""

from __future__ import annotations

import socket

import ray


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class WorkerGroup:
    def __init__(self, worker_cls, *args, world_size: int = 1, placement=None, role: str = "policy", seed: int = 0,
                 **kwargs):
        """``placement`` (``ppo.workers.placement.Placement``) decides each rank's resources; default: CPU shares."""
        from ppo.workers.placement import Placement

        placement = placement or Placement()
        port = free_port()
        remote_cls = ray.remote(max_concurrency=1)(worker_cls)
        self.actors = [
            remote_cls.options(**placement.options(role, rank)).remote(
                *args, rank=rank, world_size=world_size, master_port=port, seed=seed, **kwargs)
            for rank in range(world_size)
        ]
        self.call("ready")

    def call(self, method: str, *args, **kwargs):
        refs = [getattr(actor, method).remote(*args, **kwargs) for actor in self.actors]
        return ray.get(refs)[0]

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
