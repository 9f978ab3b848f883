"""A worker group's rendezvous: a port found free on rank 0's node can be taken before rank 0 binds it; the group
then rendezvouses again on a fresh port instead of failing the run (other creation errors still fail it)."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

pytestmark = pytest.mark.slow


class StoreWorker:
    """Binds the group's store like torch.distributed's rendezvous does (rank 0 listens on the master port)."""

    def __init__(self, *, rank, world_size, master_addr, master_port, seed, fail=False):
        import torch

        if fail:
            raise ValueError("a real error in the worker")
        self.store = torch.distributed.TCPStore(master_addr, master_port, world_size, rank == 0,
                                                timeout=timedelta(seconds=30))

    def ready(self) -> bool:
        return True


@pytest.fixture(scope="module")
def ray_local():
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray(num_cpus=2)
    yield
    ray.shutdown()


def test_a_taken_port_means_a_second_rendezvous(ray_local, monkeypatch):
    import ray

    from ppo.workers.group import WorkerGroup, local_placement

    placement = local_placement("policy", 2)
    taken = socket.socket()
    taken.bind(("", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real = placement.rendezvous

    def rendezvous(role, **kwargs):
        host, port = real(role, **kwargs)
        return host, ports.pop() if ports else port

    monkeypatch.setattr(placement, "rendezvous", rendezvous)
    try:
        group = WorkerGroup(StoreWorker, world_size=2, placement=placement)
        assert group.call_all(StoreWorker.ready) == [True, True]
        assert ports == [], "the first rendezvous used the taken port"
        group.kill()
        with pytest.raises(ray.exceptions.RayActorError, match="a real error in the worker"):
            WorkerGroup(StoreWorker, world_size=2, placement=placement, fail=True)
    finally:
        taken.close()


class ThreadReport:
    """A Megatron worker's start (``MegatronWorker.__init__``) and what it then runs with."""

    def __init__(self, spec, **kwargs):
        from ppo.workers.megatron_worker import MegatronWorker

        MegatronWorker.__init__(self, spec, **kwargs)

    def threads(self) -> tuple:
        import os

        import torch

        return torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS")

    def ready(self) -> bool:
        return True


def test_a_worker_runs_the_threads_its_placement_gives_unless_its_role_sets_them(ray_local):
    """3 threads from the placement (not Ray's OMP_NUM_THREADS=1, nor this machine's every core): OpenMP, MKL and
    torch alike; a role's own ``num_threads`` in their place."""
    from ppo.cluster.placement import cpu_placement
    from ppo.workers.group import WorkerGroup, local_placement
    from ppo.workers.specs import MegatronPolicy

    placement = cpu_placement(local_placement("policy", 1).plan, threads=3)
    group = WorkerGroup(ThreadReport, MegatronPolicy(), world_size=1, placement=placement)
    try:
        assert group.call(ThreadReport.threads) == (3, "3", "3")
    finally:
        group.kill()
    own = placement.options("policy", 0, threads=2)["runtime_env"]["env_vars"]
    assert own == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    assert "runtime_env" not in placement.options("generation", 0), "a CPU engine's threads are vLLM's own"
