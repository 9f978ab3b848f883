"""Where the worker groups' Ray actors run: colocated on the same GPUs, one placement-group bundle per GPU.

Without GPUs (CPU runs, the tests) there is nothing to place: actors ask for CPU shares only.  With GPUs, a placement
group of ``n`` bundles ``{"GPU": 1, "CPU": 1}`` (packed onto as few nodes as possible) is reserved, and rank ``i`` of
every group is pinned to bundle ``i`` with a fraction of its GPU, so the policy, the critic and vLLM share each device
and take turns using its memory (``PPOTrainer.enter_phase`` offloads the Megatron workers while vLLM generates and
puts vLLM to sleep while they train).  Ray then sets ``CUDA_VISIBLE_DEVICES`` of each actor to its bundle's GPU.

Limits: the vLLM engine runs as one actor on bundle 0, so ``generation.tensor_parallel_size`` must be 1 when the
trainer places GPUs itself; multi-GPU engines and groups spread over separate nodes are not placed yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_SHARES = {"policy": 0.4, "critic": 0.3, "generation": 0.3}
"""Fractions of each GPU requested per group; Ray only needs them to sum to at most 1 for the actors to share it."""


@dataclass
class Placement:
    """Actor options per (group, rank): CPU-only when ``group`` is None, else pinned to bundle ``rank``."""

    group: Any = None  # ray.util.placement_group.PlacementGroup
    num_cpus: float = 0.5

    def options(self, role: str, rank: int) -> dict:
        if self.group is None:
            return {"num_cpus": self.num_cpus, "num_gpus": 0}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return {
            "num_cpus": self.num_cpus / 4,
            "num_gpus": GPU_SHARES[role],
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self.group, placement_group_bundle_index=rank,
                placement_group_capture_child_tasks=True),
        }


def plan_placement(*, world_sizes: list[int], generation_tp: int, timeout_s: float = 600) -> Placement:
    """Reserve one bundle per GPU the largest group needs, if the Ray cluster has GPUs; else CPU-only placement."""
    import ray

    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus == 0:
        return Placement()
    if generation_tp != 1:
        raise ValueError(f"generation.tensor_parallel_size={generation_tp}: the trainer places a single-GPU vLLM "
                         "engine colocated with the Megatron ranks; multi-GPU engines are not placed yet")
    bundles = max(world_sizes)
    if bundles > gpus:
        raise ValueError(f"the worker groups need {bundles} GPUs, the Ray cluster has {gpus}")
    from ray.util.placement_group import placement_group

    group = placement_group([{"GPU": 1, "CPU": 1}] * bundles, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        raise TimeoutError(f"Ray could not reserve {bundles} GPU bundles in {timeout_s:.0f} s (are the GPUs busy?)")
    return Placement(group=group, num_cpus=1.0)
