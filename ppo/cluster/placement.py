"""Ray placement from a :class:`ppo.cluster.plan.PlacementPlan`: where each worker actor runs.

With GPUs (a SLURM job, or a Ray cluster whose nodes declare logical GPUs with ``ray start --num-gpus=N``), one
placement group per node of the plan is reserved, ``STRICT_PACK`` with one ``{"GPU": 1}`` bundle per GPU, so plan
node *n* is one Ray node and plan GPU *g* is bundle *g* of its group.  A rank of a role is pinned to its slot's bundle
with a fraction of that GPU (:data:`GPU_SHARES`), so the policy, critic and engine ranks of a slot share the device
and take turns with its memory (``ppo.loop.gpu_turns.GpuTurns``).  Ray sets each actor's ``CUDA_VISIBLE_DEVICES`` to its
bundle's GPU, which is why a worker's device is always its first visible GPU, never its rank.  An engine of TP > 1
is an actor in its first slot's bundle holding no GPU share; vLLM's Ray executor puts its tensor-parallel workers in
the bundles of its slots, each with the engine's share (:func:`engine_worker_env`).

Without GPUs (the CPU default, most tests) every actor runs on the driver's node with a CPU share: the plan is
CPU-only and nothing is reserved.

Groups rendezvous at their rank 0's node: :meth:`Placement.rendezvous` runs a probe in rank 0's slot that returns the
node's IP, as Ray reports it, and a port that was free there.

Threads: every actor is started with ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to its share of its node's CPUs
(:attr:`Placement.threads`, from the plan: :func:`ppo.cluster.plan.threads_per_process`) or its role's own count,
instead of what it would inherit (Ray's 1, or the machine's every core); the Megatron workers set torch's count from
them as they start.  On CPU-only plans an engine's threads stay vLLM's own (it binds them to cores itself).  Ray's
``num_cpus`` stays a scheduling share: the GPU bundles hold GPUs only, and a CPU-only plan's actors share the
driver's node by halves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

from ppo.cluster.deadline import get_within
from ppo.cluster.plan import PlacementPlan, Slot
from ppo.cluster.ports import free_port

GPU_SHARES = {"policy": 0.4, "critic": 0.3, "generation": 0.3}
"""Fractions of each GPU requested per role; Ray only needs them to sum to at most 1 for the actors to share it."""


class PlacementTimeout(TimeoutError):
    pass


def node_address() -> tuple[str, int]:
    """Runs where it is called: this node's IP as Ray knows it, and a port free on it."""
    return ray.util.get_node_ip_address(), free_port()


def _gpu_ids() -> list:
    return ray.get_gpu_ids()


def cluster_shape() -> tuple[int, int]:
    """``(nodes, gpus_per_node)`` of the connected Ray cluster's GPU nodes; ``(1, 0)`` when it has no GPUs.

    Nodes with different GPU counts are refused: the plan lays ranks out over identical nodes.
    """
    counts = [int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n["Alive"]]
    counts = [c for c in counts if c > 0]
    if not counts:
        return 1, 0
    if len(set(counts)) > 1:
        raise RuntimeError(f"the Ray cluster's GPU nodes have different GPU counts ({sorted(counts)}); the placement "
                           f"plan needs nodes of equal size")
    return len(counts), counts[0]


def check_cluster_shape(planned: tuple[int, int], actual: tuple[int, int]) -> None:
    """Refuse a Ray cluster whose ``(nodes, gpus_per_node)`` is not the one the job was planned (and dry-run) for.

    Without GPUs on either side the plan is CPU-only and the node count does not matter."""
    if (planned[1] or actual[1]) and tuple(actual) != tuple(planned):
        raise RuntimeError(f"the job was planned (and dry-run) for executor.nodes={planned[0]} × "
                           f"executor.gpus_per_node={planned[1]}, but its Ray cluster has {actual[0]} GPU node(s) × "
                           f"{actual[1]} GPUs; set those two to the cluster's shape")


@dataclass
class Placement:
    """Actor options per (role, rank) for ``plan``: pinned to the reserved bundles, or CPU shares on ``cpu_node``."""

    plan: PlacementPlan
    node_groups: list = field(default_factory=list)  # one Ray placement group per plan node (empty: CPU-only)
    gpu_ids: dict = field(default_factory=dict)  # Slot -> the GPU ID Ray gave that bundle
    cpu_node: str | None = None  # CPU-only: the node every actor runs on (the driver's)
    num_cpus: float = 0.5
    threads: int | None = None  # each actor's threads (OMP, MKL, torch); None: what it inherits

    def _strategy(self, slot: Slot) -> Any:
        if not self.node_groups:
            return NodeAffinitySchedulingStrategy(node_id=self.cpu_node, soft=False)
        return PlacementGroupSchedulingStrategy(placement_group=self.node_groups[slot.node],
                                                placement_group_bundle_index=slot.gpu,
                                                placement_group_capture_child_tasks=True)

    def options(self, role: str, rank: int, threads: int | None = None) -> dict:
        """Ray options of rank ``rank`` of ``role`` (``generation``: engine ``rank``); ``threads``: the role's own
        count, in place of :attr:`threads`."""
        if role == "generation":
            slots = self.plan.engine_slots(rank)
        else:
            slots = (self.plan.ranks[role][rank],)
        count = threads or self.threads
        env = thread_env(count) if count and (self.node_groups or role != "generation") else {}
        if not self.node_groups:
            options = {"num_cpus": self.num_cpus, "num_gpus": 0, "scheduling_strategy": self._strategy(slots[0])}
        else:
            options = {"num_cpus": 0, "num_gpus": GPU_SHARES[role], "scheduling_strategy": self._strategy(slots[0])}
            if len(slots) > 1:
                options["num_gpus"] = 0
                env.update(engine_worker_env(slots, self.gpu_ids))
        if env:
            options["runtime_env"] = {"env_vars": env}
        return options

    def rendezvous(self, role: str, timeout_s: float | None = None) -> tuple[str, int]:
        """Rank 0's node IP (as Ray reports it) and a port free there, probed in rank 0's slot."""
        slot = self.plan.ranks[role][0]
        probe = ray.remote(node_address).options(num_cpus=0, num_gpus=0, scheduling_strategy=self._strategy(slot))
        return get_within([probe.remote()], timeout_s, [f"{role} rank 0's slot"], "the rendezvous probe")[0]

    def release(self) -> None:
        for group in self.node_groups:
            remove_placement_group(group)
        self.node_groups = []


def thread_env(threads: int) -> dict[str, str]:
    """The variables that size a process's OpenMP and MKL thread pools (torch's included, as it starts)."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def engine_worker_env(slots: tuple[Slot, ...], gpu_ids: dict) -> dict[str, str]:
    """The environment of an engine of TP > 1: its tensor-parallel workers are vLLM Ray actors, worker *r* in the
    bundle of slot *r* with the engine's share of that GPU (``ppo.rollout.vllm_engine.executor_backend``), so the
    engine's own actor holds no GPU share; it sees the engine's GPUs (to open the refit's CUDA IPC handles)."""
    return {"VLLM_RAY_BUNDLE_INDICES": ",".join(str(s.gpu) for s in slots),
            "VLLM_RAY_PER_WORKER_GPUS": str(GPU_SHARES["generation"]),
            "CUDA_VISIBLE_DEVICES": ",".join(str(gpu_ids[s]) for s in slots),
            "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


def cpu_placement(plan: PlacementPlan, num_cpus: float = 0.5, threads: int | None = None) -> Placement:
    """Every actor on the driver's node with ``num_cpus`` CPU shares (no GPUs), ``threads`` threads each."""
    return Placement(plan, cpu_node=ray.get_runtime_context().get_node_id(), num_cpus=num_cpus, threads=threads)


def reserve(plan: PlacementPlan, *, threads: int | None = None, timeout_s: float = 600) -> Placement:
    """Reserve ``plan``'s GPUs in the connected Ray cluster (a CPU-only plan reserves nothing); every actor placed
    gets ``threads`` threads (see the module docstring)."""
    if plan.cpu_only:
        return cpu_placement(plan, threads=threads)
    groups = [placement_group([{"GPU": 1}] * plan.gpus_per_node, strategy="STRICT_PACK", name=f"ppo-node{n}")
              for n in range(plan.nodes)]
    ready, _ = ray.wait([g.ready() for g in groups], num_returns=len(groups), timeout=timeout_s)
    if len(ready) < len(groups):
        for group in groups:
            ray.util.remove_placement_group(group)
        raise PlacementTimeout(f"Ray could not reserve {plan.nodes} node(s) × {plan.gpus_per_node} GPUs in "
                               f"{timeout_s:.0f} s (are the GPUs busy, or the nodes smaller?)")
    placement = Placement(plan, node_groups=groups, threads=threads)
    probes = {}
    for n in range(plan.nodes):
        for g in range(plan.gpus_per_node):
            slot = Slot(n, g)
            probes[slot] = ray.remote(_gpu_ids).options(num_cpus=0, num_gpus=0.01,
                                                         scheduling_strategy=placement._strategy(slot)).remote()
    answers = get_within(list(probes.values()), timeout_s, [f"GPU {s.gpu} of node {s.node}" for s in probes],
                         "the GPU-id probe")
    placement.gpu_ids = {slot: ids[0] for slot, ids in zip(probes, answers)}
    return placement
