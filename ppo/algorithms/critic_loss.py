"""The critic's clipped value loss and the statistics behind explained variance.

``V_c = clamp(V, V_old − ε_v, V_old + ε_v)``;
``L_V = 0.5·scale·Σ max((V − R)², (V_c − R)²)·m / N_tokens_global`` (plain ``0.5·scale·MSE`` without clipping).

Explained variance ``EV = 1 − Var(R − V)/Var(R)`` must come from sums over the whole batch, not from averaging
per-micro-batch EVs; so the metrics carry pre-normalised first and second moments (``returns_mean``,
``returns_sq_mean``, ``values_mean``, ``residual_sq_mean``) that sum across micro-batches, and
``explained_variance`` turns the summed moments into EV.

Hand-worked example (one token, scale 1, ε_v = 0.2): V_old = 0, V = 1, R = 1 gives V_c = 0.2,
``max((1−1)², (0.2−1)²) = 0.64``, loss 0.32, and the token counts as clipped.
"""

from __future__ import annotations

import torch

from ppo.algorithms.masked import masked_max, masked_min, masked_sum


def explained_variance(
    returns_mean: torch.Tensor,
    returns_sq_mean: torch.Tensor,
    values_mean: torch.Tensor,
    residual_sq_mean: torch.Tensor,
) -> torch.Tensor:
    """``1 − [E(R−V)² − (E R − E V)²] / max(E R² − (E R)², 1e-8)`` from global moments."""
    residual_var = residual_sq_mean - (returns_mean - values_mean) ** 2
    returns_var = torch.clamp(returns_sq_mean - returns_mean**2, min=1e-8)
    return 1.0 - residual_var / returns_var


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_range: float | None = 0.2,
    scale: float = 1.0,
    global_valid_toks: torch.Tensor | float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped MSE of the critic on one (micro-)batch, normalised by the global token count, and its metrics."""
    if clip_range is not None and clip_range <= 0:
        raise ValueError(f"value clip_range must be > 0 (or None to disable), got {clip_range}")
    m = mask.to(values.dtype)
    if global_valid_toks is None:
        global_valid_toks = m.sum().clamp(min=1)
    token_mean = lambda x: masked_sum(x.detach(), m) / global_valid_toks  # noqa: E731

    error = (values - returns) ** 2
    if clip_range is None:
        per_token = error
        clipped = torch.zeros_like(error)
    else:
        values_clipped = old_values + (values - old_values).clamp(-clip_range, clip_range)
        error_clipped = (values_clipped - returns) ** 2
        per_token = torch.maximum(error, error_clipped)
        clipped = (error_clipped > error).to(m.dtype)
    loss = 0.5 * scale * masked_sum(per_token, m) / global_valid_toks

    moments = {
        "returns_mean": token_mean(returns),
        "returns_sq_mean": token_mean(returns**2),
        "values_mean": token_mean(values),
        "residual_sq_mean": token_mean((returns - values) ** 2),
    }
    metrics = {
        "loss": loss.detach(),
        "vf_clipfrac": token_mean(clipped),
        **moments,
        "values_min": masked_min(values.detach(), m),
        "values_max": masked_max(values.detach(), m),
        "explained_var": explained_variance(**moments),
    }
    return loss, metrics
