"""DAPO dynamic sampling: keep only prompt groups whose rewards differ, so every kept sample has a signal."""

from __future__ import annotations

import torch

from ppo.algorithms.groups import group_mean_std


def dynamic_sampling_mask(rewards: torch.Tensor, group_ids: torch.Tensor, *, min_std: float = 0.0) -> torch.Tensor:
    """Bool ``[B]``: True for samples whose group's reward std is above ``min_std`` (all-equal groups are dropped).

    A group where every sample got the same reward yields zero advantage under group baselines (and, after
    whitening, no useful signal), so DAPO regenerates instead of training on it.  Groups of one are dropped.
    """
    _, std, count = group_mean_std(rewards, group_ids)
    return (std > min_std) & (count > 1)
