"""Activation recomputation: keep fewer activations in the forward pass and recompute them in backward.

Long sequences are what makes this necessary: a 10k-token micro-batch of a 7B model keeps every layer's activations
for backward, which does not fit on one GPU at TP 4.  Megatron-Core does the work (``TransformerConfig``'s
``recompute_granularity`` / ``recompute_method`` / ``recompute_num_layers``); this experiment component names the
settings, refuses combinations Megatron would reject (before launch, in one line) and never changes the math:
``tests/models/test_recompute.py`` checks that loss and gradients are the same with and without it.

- ``granularity="selective"``: recompute the core attention of every layer (Megatron's ``core_attn``): the T × T
  scores, the largest activation of the local layer spec.  ``method`` and ``num_layers`` stay unset.
- ``granularity="full"``: keep only each checkpointed chunk's input and recompute the whole chunk.
  ``method="uniform"`` checkpoints chunks of ``num_layers`` layers (1 = every layer: least memory);
  ``method="block"`` checkpoints the first ``num_layers`` layers of each pipeline stage and keeps the rest.

No torch import: experiment files and dry runs use this class.
"""

from __future__ import annotations

from dataclasses import dataclass

GRANULARITIES = (None, "selective", "full")
METHODS = ("uniform", "block")


class RecomputeError(ValueError):
    pass


@dataclass(frozen=True)
class Recompute:
    granularity: str | None = None  # None (keep every activation), "selective" or "full"
    method: str | None = None  # "full" only: "uniform" or "block"
    num_layers: int | None = None  # "full" only: layers per checkpointed chunk (uniform) or per stage (block)

    def check(self, layers_per_stage: int | None = None) -> None:
        """Raise ``RecomputeError`` (one line naming the setting) for settings Megatron would refuse or ignore."""
        if self.granularity not in GRANULARITIES:
            raise RecomputeError(f"recompute.granularity must be None, 'selective' or 'full', got {self.granularity!r}")
        if self.granularity != "full":
            if self.method is not None or self.num_layers is not None:
                what = "nothing is recomputed" if self.granularity is None else "selective recompute covers every layer"
                raise RecomputeError(f"recompute.method and recompute.num_layers apply to granularity='full' only "
                                     f"({what}): leave them None")
            return
        if self.method not in METHODS:
            raise RecomputeError(f"recompute.granularity='full' needs recompute.method 'uniform' or 'block', "
                                 f"got {self.method!r}")
        if not isinstance(self.num_layers, int) or self.num_layers < 1:
            raise RecomputeError(f"recompute.granularity='full' needs recompute.num_layers >= 1, "
                                 f"got {self.num_layers!r}")
        if layers_per_stage is not None and self.num_layers > layers_per_stage:
            raise RecomputeError(f"recompute.num_layers={self.num_layers} is more than the {layers_per_stage} "
                                 f"layers of a pipeline stage")

    def transformer_config(self) -> dict:
        """The ``TransformerConfig`` arguments (empty when recomputation is off)."""
        if self.granularity is None:
            return {}
        return {"recompute_granularity": self.granularity, "recompute_method": self.method,
                "recompute_num_layers": self.num_layers}
