"""Statistics over each prompt's group of samples (GRPO's baseline, dynamic sampling's filter, the step's metrics).

Apart from :mod:`ppo.algorithms.advantages` so that the Megatron workers, which reduce their metrics with it, do not
import the estimators' numba GAE scan (0.7 s of every worker's start)."""

from __future__ import annotations

import torch


def group_mean_std(values: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample mean, unbiased std and size of the sample's group (std is 0 for a group of one)."""
    _, inverse = torch.unique(group_ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1
    x = values.to(torch.float64)
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, torch.ones_like(x))
    total = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, x)
    mean = total / count
    sq_dev = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, inverse, (x - mean[inverse]) ** 2)
    std = (sq_dev / (count - 1).clamp(min=1)).sqrt()
    to = lambda t: t[inverse].to(values.dtype)  # noqa: E731
    return to(mean), to(std), count[inverse].to(values.dtype)
