"""The placement plan: which GPU of the job every rank of every role uses.  Pure Python: no torch, no Ray.

One function, :func:`plan_placement`, serves the dry run, validation and the run itself: ``launch.py --dry-run``
prints its grid, :meth:`ppo.experiment.Experiment.check` refuses what it cannot place, and the trainer reserves
Ray placement groups from the same :class:`PlacementPlan` (:mod:`ppo.cluster.placement`).  So a layout that
dry-runs is a layout that places.

Roles and their ranks:

- ``policy`` and ``critic``: Megatron groups of ``tensor × context × pipeline × data_parallel`` ranks, numbered the
  way Megatron numbers them (``tp-cp-ep-dp-pp``: tensor-parallel ranks are consecutive), so a tensor-parallel group
  is a run of consecutive ranks that must sit in one node (it talks on every layer);
- ``generation``: ``num_engines`` vLLM engines of ``tensor_parallel_size`` GPUs each; engine ``e``'s ranks are
  ``e·t … e·t + t − 1``, and an engine lives in one node.

How ranks are laid out over a pool of GPUs (all of the job's GPUs when colocated; training GPUs first and
generation GPUs after them when not): when the ranks divide evenly over the pool's nodes in whole tensor-parallel
groups, each node gets the same share (so data-parallel replicas are spread over every node); otherwise they fill the
pool node by node.  Colocated roles share GPUs and take turns with their memory (``ppo.loop.gpu_turns.GpuTurns``).

A GPU a role does not use sits idle while that role works; a plan with idle GPUs is refused unless
``allow_idle_gpus`` says so.  Every refusal is one line that names the setting to change.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

ROLE_LETTER = {"policy": "P", "critic": "C", "generation": "E"}


class PlacementError(ValueError):
    """A layout the job's GPUs cannot hold; the message names the setting."""


@dataclass(frozen=True)
class GroupLayout:
    """A Megatron worker group's parallel layout; ``name`` is its config path (``policy``, ``critic``)."""

    name: str
    tensor: int = 1
    context: int = 1
    pipeline: int = 1
    data: int = 1

    @property
    def world_size(self) -> int:
        return self.tensor * self.context * self.pipeline * self.data


@dataclass(frozen=True)
class EngineLayout:
    """``engines`` vLLM engines of ``tensor`` GPUs each."""

    engines: int = 1
    tensor: int = 1

    @property
    def world_size(self) -> int:
        return self.engines * self.tensor


@dataclass(frozen=True)
class Slot:
    """A GPU: ``node`` index in the job and ``gpu`` index in that node."""

    node: int
    gpu: int


@dataclass(frozen=True)
class RefitRoute:
    """How tensor-parallel worker ``worker`` of engine ``engine`` receives the policy's weights: ``ipc`` from the
    policy rank on its GPU, or ``broadcast`` from policy rank ``sender`` over a torch.distributed group (other GPUs
    or nodes).  Every worker of an engine receives the whole weights; vLLM's loader takes its shard."""

    engine: int
    transport: str
    sender: int
    worker: int = 0


@dataclass(frozen=True)
class PlacementPlan:
    nodes: int
    gpus_per_node: int
    colocated: bool
    ranks: dict[str, tuple[Slot, ...]]  # role -> the slot of each rank (generation: engine-major)
    engine_tensor: int
    policy_tensor: int
    cpu_only: bool = False  # no GPUs: every rank is a CPU process (local runs, the tests)
    idle_allowed: bool = False

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def used(self) -> set[Slot]:
        return {slot for slots in self.ranks.values() for slot in slots}

    @property
    def num_engines(self) -> int:
        return len(self.ranks["generation"]) // self.engine_tensor

    def engine_slots(self, engine: int) -> tuple[Slot, ...]:
        t = self.engine_tensor
        return self.ranks["generation"][engine * t : (engine + 1) * t]

    def refit_routes(self) -> list[RefitRoute]:
        """Per engine worker (tensor-parallel rank): IPC from the tensor-parallel rank 0 of a policy group on the
        worker's GPU (it holds the gathered weights), else a broadcast from policy rank 0.  CPU-only plans share one
        machine: every worker reads policy rank 0's shared memory."""
        workers = range(self.engine_tensor)
        if self.cpu_only:
            return [RefitRoute(e, "ipc", 0, w) for e in range(self.num_engines) for w in workers]
        assemblers = {slot: rank for rank, slot in enumerate(self.ranks["policy"]) if rank % self.policy_tensor == 0}
        routes = []
        for e in range(self.num_engines):
            for w, slot in enumerate(self.engine_slots(e)):
                sender = assemblers.get(slot)
                routes.append(RefitRoute(e, "ipc", sender, w) if sender is not None
                              else RefitRoute(e, "broadcast", 0, w))
        return routes

    def worker_processes(self) -> int:
        """Worker processes on the fullest node: a Megatron rank or an engine rank per slot entry, and the engine's
        own actor beside the workers of an engine of TP > 1 (on its first slot's node).  CPU-only: all of them."""
        per_node: dict[int, int] = {}
        for slots in self.ranks.values():
            for slot in slots:
                per_node[slot.node] = per_node.get(slot.node, 0) + 1
        if self.engine_tensor > 1:
            for engine in range(self.num_engines):
                node = self.engine_slots(engine)[0].node
                per_node[node] = per_node.get(node, 0) + 1
        return max(per_node.values(), default=0)

    def gpus_used_line(self) -> str:
        if self.cpu_only:
            return "GPUs used: 0 of 0"
        return f"GPUs used: {len(self.used)} of {self.total_gpus}"

    def grid(self) -> str:
        """The node × GPU map: which policy (P), critic (C) and engine (E<engine>.<tp rank>) ranks share each GPU."""
        if self.cpu_only:
            counts = ", ".join(f"{role} {len(slots)}" for role, slots in self.ranks.items() if slots)
            return f"no GPUs declared: every rank is a CPU process ({counts})\n{self.gpus_used_line()}"
        cells: dict[Slot, list[str]] = {}
        for role, slots in self.ranks.items():
            for rank, slot in enumerate(slots):
                label = (f"E{rank // self.engine_tensor}.{rank % self.engine_tensor}" if role == "generation"
                         else f"{ROLE_LETTER[role]}{rank}")
                cells.setdefault(slot, []).append(label)
        header = [""] + [f"gpu{g}" for g in range(self.gpus_per_node)]
        rows = [header] + [
            [f"node{n}"] + [" ".join(cells.get(Slot(n, g), ["idle"])) for g in range(self.gpus_per_node)]
            for n in range(self.nodes)
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        return "\n".join(lines + [self.gpus_used_line()])


def _lay_out(world: int, block: int, pool: list[Slot]) -> list[Slot]:
    """Slots for ``world`` ranks in groups of ``block`` consecutive ranks: an even share per node of the pool when the
    ranks divide into whole groups per node, else node by node in pool order."""
    nodes = sorted({s.node for s in pool})
    by_node = {n: [s for s in pool if s.node == n] for n in nodes}
    if world % len(nodes) == 0:
        share = world // len(nodes)
        if share % block == 0 and all(len(by_node[n]) >= share for n in nodes):
            return [by_node[nodes[r // share]][r % share] for r in range(world)]
    return pool[:world]


def _check_blocks(slots: list[Slot], block: int, what: str) -> None:
    for start in range(0, len(slots), block):
        nodes = {s.node for s in slots[start : start + block]}
        if len(nodes) > 1:
            raise PlacementError(f"{what} puts ranks {start}-{start + block - 1} on nodes "
                                 f"{', '.join(map(str, sorted(nodes)))}: each group must fit in one node")


def plan_placement(
    *,
    nodes: int,
    gpus_per_node: int,
    groups: list[GroupLayout],
    generation: EngineLayout,
    colocated: bool = True,
    allow_idle_gpus: bool = False,
) -> PlacementPlan:
    """Map every rank of ``groups`` (policy first, then critic) and of the engines to a GPU of the job, or raise
    :class:`PlacementError` with one line.  ``gpus_per_node == 0``: no GPUs, a CPU-only plan (ranks are processes)."""
    for group in groups:
        for name in ("tensor", "context", "pipeline", "data"):
            if getattr(group, name) < 1:
                setting = "data_parallel" if name == "data" else f"parallel.{name}"
                raise PlacementError(f"{group.name}.{setting} must be >= 1, got {getattr(group, name)}")
    if generation.engines < 1:
        raise PlacementError(f"generation.num_engines must be >= 1, got {generation.engines}")
    if generation.tensor < 1:
        raise PlacementError(f"generation.tensor_parallel_size must be >= 1, got {generation.tensor}")
    if nodes < 1:
        raise PlacementError(f"executor.nodes must be >= 1, got {nodes}")
    policy_tp = groups[0].tensor if groups else 1
    if gpus_per_node == 0:
        ranks = {g.name: tuple(Slot(0, 0) for _ in range(g.world_size)) for g in groups}
        ranks["generation"] = tuple(Slot(0, 0) for _ in range(generation.world_size))
        return PlacementPlan(nodes, 0, colocated, ranks, generation.tensor, policy_tp, cpu_only=True,
                             idle_allowed=allow_idle_gpus)
    total = nodes * gpus_per_node
    everything = [Slot(n, g) for n in range(nodes) for g in range(gpus_per_node)]
    t = generation.tensor
    if t > gpus_per_node:
        raise PlacementError(f"generation.tensor_parallel_size={t} does not fit in a node of "
                             f"executor.gpus_per_node={gpus_per_node}: an engine lives in one node")
    if colocated:
        train_pool, gen_pool = everything, everything
    else:
        if generation.world_size >= total:
            raise PlacementError(f"generation.num_engines={generation.engines} × generation.tensor_parallel_size="
                                 f"{t} takes all {total} GPUs and leaves none to train on (colocated=False)")
        train_pool, gen_pool = everything[: total - generation.world_size], everything[total - generation.world_size :]

    ranks: dict[str, tuple[Slot, ...]] = {}
    for group in groups:
        if group.tensor > gpus_per_node:
            raise PlacementError(f"{group.name}.parallel.tensor={group.tensor} spans nodes: tensor parallelism must "
                                 f"fit in one node of executor.gpus_per_node={gpus_per_node}")
        if group.world_size > len(train_pool):
            raise PlacementError(
                f"{group.name}: tensor {group.tensor} × context {group.context} × pipeline {group.pipeline} × "
                f"data_parallel {group.data} = {group.world_size} ranks, more than the {len(train_pool)} GPUs it "
                f"can use; lower {group.name}.data_parallel")
        slots = _lay_out(group.world_size, group.tensor, train_pool)
        _check_blocks(slots, group.tensor, f"{group.name}.parallel.tensor={group.tensor}")
        ranks[group.name] = tuple(slots)
    if generation.world_size > len(gen_pool):
        raise PlacementError(f"generation.num_engines={generation.engines} × generation.tensor_parallel_size={t} = "
                             f"{generation.world_size} GPUs, more than the {len(gen_pool)} it can use; lower "
                             f"generation.num_engines")
    engine_slots = _lay_out(generation.world_size, t, gen_pool)
    _check_blocks(engine_slots, t, f"generation.tensor_parallel_size={t}")
    ranks["generation"] = tuple(engine_slots)
    plan = PlacementPlan(nodes, gpus_per_node, colocated, ranks, t, policy_tp, idle_allowed=allow_idle_gpus)
    if not allow_idle_gpus:
        _refuse_idle(plan, groups, generation, train_pool, gen_pool)
    return plan


def _refuse_idle(plan: PlacementPlan, groups: list[GroupLayout], generation: EngineLayout,
                 train_pool: list[Slot], gen_pool: list[Slot]) -> None:
    for group in groups:
        if len(plan.ranks[group.name]) < len(train_pool):
            fill = len(train_pool) // (group.world_size // group.data)
            raise PlacementError(
                f"{group.name} uses {group.world_size} of the {len(train_pool)} GPUs it could train on, the rest "
                f"idle while it works; set {group.name}.data_parallel={fill} (or allow_idle_gpus=True)")
    if len(plan.ranks["generation"]) < len(gen_pool):
        raise PlacementError(
            f"generation.num_engines={generation.engines} × generation.tensor_parallel_size={generation.tensor} "
            f"uses {generation.world_size} of the {len(gen_pool)} GPUs, the rest idle while it generates; set "
            f"generation.num_engines={len(gen_pool) // generation.tensor} (or allow_idle_gpus=True)")


def threads_per_process(cpus_per_node: int, processes_per_node: int) -> int:
    """Each process's share of a node's CPUs (at least one): its OpenMP, MKL and torch thread count.  More threads
    than that only contend for the cores (and an OpenMP team spin-waits on the ones it shares)."""
    return max(1, cpus_per_node // max(1, processes_per_node))


def machine_cpus() -> int:
    """CPUs this process may run on (its affinity, which SLURM and cgroups narrow), not the machine's count."""
    return len(os.sched_getaffinity(0))


def machine_gpus() -> int:
    """GPUs a job started on this machine sees: ``CUDA_VISIBLE_DEVICES`` when set, else the NVIDIA device nodes."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and not d.strip().startswith("-")])
    return len(glob.glob("/dev/nvidia[0-9]*"))
