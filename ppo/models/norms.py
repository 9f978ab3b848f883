"""The local layer spec's norm: ``torch.nn.RMSNorm`` that runs under sequence parallelism, as Transformer Engine's
norms do (Megatron's own torch norm refuses it)."""

from __future__ import annotations

import torch


class SequenceParallelRMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` built the way Megatron builds its norms, its weight marked ``sequence_parallel`` as
    Transformer Engine marks its norms' weights.

    Under sequence parallelism a norm between the blocks sees only its rank's slice of the sequence, so its weight's
    gradient is a part of the whole; Megatron's ``finalize_model_grads`` sums the parameters marked
    ``sequence_parallel`` over the TP ranks.  The q/k norms see every position but only the rank's heads: that sum
    completes them as well (Megatron sums them for ``qk_layernorm`` anyway, once).  The norm is per position, so it
    needs nothing else to run on a slice.
    """

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_unused):
        if config.normalization != "RMSNorm":
            raise ValueError(f"the local layer spec builds RMSNorm only, got {config.normalization!r}")
        super().__init__(hidden_size, eps=eps)
        self.weight.sequence_parallel = config.sequence_parallel
