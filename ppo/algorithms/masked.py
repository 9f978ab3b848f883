"""Reductions over the trainable-token mask ``m`` (1 = counts, 0 = prompt, padding or environment tokens)."""

from __future__ import annotations

import torch


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    return (x * mask).sum() if dim is None else (x * mask).sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1; 0 where the mask is empty (never NaN)."""
    return masked_sum(x, mask, dim) / mask.sum(dim).clamp(min=1)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` over the masked entries, unbiased (×N/(N−1)) by default."""
    n = mask.sum()
    centred = (x - masked_mean(x, mask)) ** 2
    var = masked_sum(centred, mask) / n.clamp(min=1)
    if unbiased:
        var = var * n / (n - 1).clamp(min=1)
    return var


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """``(x − μ)·rsqrt(σ² + eps)`` over the mask; with ``shift_mean=False`` the mean is added back."""
    mean = masked_mean(x, mask)
    whitened = (x - mean) * torch.rsqrt(masked_var(x, mask) + eps)
    return whitened if shift_mean else whitened + mean


def masked_min(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Minimum over the mask; +inf for an empty mask (the identity of min, so reductions stay correct)."""
    return torch.where(mask.bool(), x, torch.full_like(x, float("inf"))).min()


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Maximum over the mask; −inf for an empty mask."""
    return torch.where(mask.bool(), x, torch.full_like(x, float("-inf"))).max()
