"""The parallel layout (tensor / pipeline / context parallel, sequence parallel) a worker group runs with.

``ParallelConfig`` is an experiment component and this module imports no torch; the process-group setup that uses
it is :func:`ppo.models.distributed.initialize`.
"""

from __future__ import annotations

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

    def check(self, world_size: int, *, num_layers: int | None = None) -> None:
        """Raise ``ParallelLayoutError`` (one line, naming the fix) for a layout that cannot run.

        Context parallelism is refused whatever the layer spec: the workers give every rank whole sequences
        (Megatron's ``get_batch_on_this_cp_rank`` split is not implemented), so context-parallel ranks would
        repeat each other's work and DDP, which sums gradients over data × context ranks, would count every token
        ``context`` times.  Sequence parallelism runs with either layer spec (``ppo.models.layers``).
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

