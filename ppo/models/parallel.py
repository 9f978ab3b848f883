"""Parallel layout (tensor / pipeline / context parallel, sequence parallel) and its process-group setup.

``ParallelConfig`` is an experiment component, so torch is imported only by :func:`initialize`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class ParallelLayoutError(ValueError):
    pass


@dataclass(frozen=True)
class ParallelConfig:
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    sequence_parallel: bool = False

    @property
    def model_parallel_size(self) -> int:
        return self.tensor * self.pipeline * self.context

    def data_parallel_size(self, world_size: int) -> int:
        return world_size // self.model_parallel_size

    def validate(self, world_size: int, *, num_layers: int | None = None) -> None:
        """Raise ``ParallelLayoutError`` (one line, naming the fix) for a layout that cannot run.

        Context parallelism is refused whatever the layer spec: the workers give every rank whole sequences
        (Megatron's ``get_batch_on_this_cp_rank`` split is not implemented), so context-parallel ranks would
        repeat each other's work and DDP, which sums gradients over data × context ranks, would count every token
        ``context`` times.  Sequence parallelism needs Transformer Engine's layers (``ppo.models.layers.check``).
        """
        for name in ("tensor", "pipeline", "context"):
            if getattr(self, name) < 1:
                raise ParallelLayoutError(f"{name} parallel size must be >= 1, got {getattr(self, name)}")
        if self.context > 1:
            raise ParallelLayoutError(
                f"context={self.context}: context parallelism is not supported (sequences are not split across "
                f"context-parallel ranks, so the gradient would count every token {self.context} times); set "
                f"context=1 and use tensor or data parallelism"
            )
        if world_size % self.model_parallel_size:
            raise ParallelLayoutError(
                f"tensor({self.tensor}) x pipeline({self.pipeline}) x context({self.context}) = "
                f"{self.model_parallel_size} does not divide the {world_size} GPUs/processes of this worker group"
            )
        if self.sequence_parallel and self.tensor == 1:
            raise ParallelLayoutError("sequence_parallel needs tensor parallel size > 1")
        if num_layers is not None and num_layers % self.pipeline:
            raise ParallelLayoutError(f"pipeline size {self.pipeline} does not divide num_layers={num_layers}")


def initialize(parallel: ParallelConfig, *, seed: int = 0) -> None:
    """Join the torch.distributed world from the environment (NCCL on GPUs, gloo on CPU) and set Megatron's groups.

    Expects ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (torchrun, Ray workers or a test harness);
    a lone process with none of them becomes a world of one on 127.0.0.1.
    """
    import torch

    from ppo.models.cpu_compat import apply_if_needed

    apply_if_needed()
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        rank, world = int(os.environ.setdefault("RANK", "0")), int(os.environ.setdefault("WORLD_SIZE", "1"))
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count())))
        torch.distributed.init_process_group(backend, rank=rank, world_size=world)
    parallel.validate(torch.distributed.get_world_size())
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=parallel.tensor,
        pipeline_model_parallel_size=parallel.pipeline,
        context_parallel_size=parallel.context,
    )
    torch.manual_seed(seed)  # CPU-initialised weights draw from the default generator
    model_parallel_cuda_manual_seed(seed)
