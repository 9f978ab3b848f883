"""Combining the metrics of micro-batches (and data-parallel ranks) into the step's metrics.

Loss functions return pieces already divided by the global counts, so most metrics are **sums**.  The exceptions,
by name: ``*_min`` take the min, ``*_max`` the max, ``lr`` and ``reward`` are averaged, the ``global_valid_*``
counts are the same on every piece, and ``explained_var`` is recomputed from the summed moments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from ppo.algorithms.value_loss import explained_variance

AVERAGED = ("lr", "reward")
SHARED = ("global_valid_toks", "global_valid_seqs")
EV_MOMENTS = ("returns_mean", "returns_sq_mean", "values_mean", "residual_sq_mean")


def reduce_microbatch_metrics(pieces: Iterable[Mapping[str, torch.Tensor | float]]) -> dict[str, float]:
    """One dict of floats from the metric dicts of several micro-batches (see the module docstring)."""
    pieces = list(pieces)
    keys = dict.fromkeys(k for p in pieces for k in p)
    reduced: dict[str, float] = {}
    for key in keys:
        values = torch.stack([torch.as_tensor(p[key], dtype=torch.float64).detach().cpu() for p in pieces if key in p])
        if key.endswith("_min"):
            reduced[key] = values.min().item()
        elif key.endswith("_max") or key in SHARED:
            reduced[key] = values.max().item()
        elif key in AVERAGED:
            reduced[key] = values.mean().item()
        else:
            reduced[key] = values.sum().item()
    if "explained_var" in reduced and all(k in reduced for k in EV_MOMENTS):
        moments = {k: torch.tensor(reduced[k], dtype=torch.float64) for k in EV_MOMENTS}
        reduced["explained_var"] = explained_variance(**moments).item()
    return reduced
