"""The clipped PPO policy loss with dual clip, IS correction for the inference mismatch, KL and VAPO NLL terms.

All inputs are ``[B, T]`` and aligned on the predicted token: ``logprobs[b, t]`` is ``log π(x_t | x_<t)`` and
``mask``/``advantages`` refer to the same token (the model code does the next-token shift).

Normalisation is by **global** counts.  A trainer that splits a batch of N tokens into micro-batches (and
data-parallel ranks) passes ``global_valid_toks=N`` (and ``global_valid_seqs``) to every call; the per-call losses
and metrics then *sum* to the full-batch values, so gradient accumulation reproduces the full-batch gradient
exactly.  Dividing each micro-batch by its own count instead is a real bug in two reference frameworks.

Hand-worked example (one token, A = −1, clip 0.2, dual clip c = 3): ratio = 5 gives
``max(−A·5, −A·1.2) = 5``, then the dual clip caps it at ``−c·A = 3``.
"""

from __future__ import annotations

import torch

from ppo.algorithms.kl import kl_penalty
from ppo.algorithms.masked import masked_max, masked_mean, masked_min, masked_sum
from ppo.algorithms.options import PolicyLoss

DEFAULT_SETTINGS = PolicyLoss()
"""The loss settings of a call that gives none: PPO's symmetric clip 0.2, token level, no extra terms."""


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    aggregation: str,
    global_valid_toks: torch.Tensor | float,
    global_valid_seqs: torch.Tensor | float,
) -> torch.Tensor:
    """Token level: ``Σ(x·m)/N_tokens_global``; sequence level: ``Σ_i mean_t(x)_i / N_seqs_global``."""
    if aggregation == "token":
        return masked_sum(per_token, mask) / global_valid_toks
    return masked_mean(per_token, mask, dim=-1).sum() / global_valid_seqs


def importance_weights(
    old_logprobs: torch.Tensor,
    generation_logprobs: torch.Tensor,
    mask: torch.Tensor,
    kind: str | None,
    cap: float,
    low: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``w = exp(logp_old − logp_gen)`` (detached, NaN → 0) truncated as ``kind`` says; also the out-of-bounds flags.

    ``tis`` caps w at ``cap``; ``icepop`` zeroes tokens whose w is outside ``[low, cap]``; ``seq-mask-tis`` zeroes
    whole sequences whose geometric-mean ratio ``exp(masked_mean_t log(π_old/π_gen))`` is outside ``[low, cap]``.
    """
    log_w = (old_logprobs - generation_logprobs).detach()
    w = torch.nan_to_num(torch.exp(log_w.clamp(-20, 20)), nan=0.0)
    if kind is None:
        return torch.ones_like(w), torch.zeros_like(w, dtype=torch.bool)
    if kind == "is":
        return w, torch.zeros_like(w, dtype=torch.bool)
    if kind == "tis":
        out_of_bounds = w > cap
        return w.clamp(max=cap), out_of_bounds
    if kind == "icepop":
        out_of_bounds = (w < low) | (w > cap)
        return w * ~out_of_bounds, out_of_bounds
    seq_ratio = torch.exp(masked_mean(torch.nan_to_num(log_w), mask, dim=-1).clamp(-20, 20))
    out_of_bounds = ((seq_ratio < low) | (seq_ratio > cap)).unsqueeze(-1).expand_as(w)
    return w * ~out_of_bounds, out_of_bounds


def clipped_pg_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    settings: PolicyLoss = DEFAULT_SETTINGS,
    *,
    generation_logprobs: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    sequence_rewards: torch.Tensor | None = None,
    global_valid_toks: torch.Tensor | float | None = None,
    global_valid_seqs: torch.Tensor | float | None = None,
    global_positive_toks: torch.Tensor | float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``loss = policy + β·KL + μ·NLL⁺`` for one (micro-)batch, with metrics named as in the notes.

    ``settings`` are the run's loss settings (``policy.loss``); the keywords are this batch's tensors and the global
    counts that normalise it (module docstring).

    Policy term: ``ratio = exp(logp − logp_old)`` (or GSPO's per-sequence ratio with ``ratio_level="sequence"``),
    ``L = max(−A·ratio, −A·clamp(ratio, 1 − clip_low, 1 + clip_high))``, and where ``A < 0`` with a dual clip,
    ``L = min(L, −c·A)``; weighted by the importance weight ``w`` (``is_correction``) and aggregated.

    KL term (``kl_coef`` > 0, needs ``ref_logprobs``): ``β·kl_penalty(logp, logp_ref, kl_kind)`` aggregated like the
    policy term; with ``kl_on_policy_approx`` weighted by ``exp(logp − logp_gen)`` (detached).

    VAPO's positive-example NLL (``nll_coef`` > 0, needs ``sequence_rewards``): ``μ·Σ(−logp·m⁺)/N⁺`` over tokens of
    samples with ``R > 0``; ``N⁺`` is ``global_positive_toks`` (default: this call's count).

    Every mean-like metric is pre-normalised by the global counts, so metrics of micro-batches sum to the full-batch
    value (``*_min``/``*_max`` reduce by min/max) — see ``ppo.algorithms.reduction.reduce_metrics``.
    """
    settings.check()
    m = mask.to(logprobs.dtype)
    aggregation = settings.aggregation
    if global_valid_toks is None:
        global_valid_toks = m.sum().clamp(min=1)
    if global_valid_seqs is None:
        global_valid_seqs = (m.sum(-1) > 0).sum().clamp(min=1)
    token_mean = lambda x: masked_sum(x.detach(), m) / global_valid_toks  # noqa: E731

    log_ratio = logprobs - old_logprobs
    if settings.ratio_level == "sequence":
        log_ratio = masked_mean(log_ratio, m, dim=-1).unsqueeze(-1).expand_as(logprobs)
    ratio = torch.exp(log_ratio.clamp(-20.0, 20.0))
    ratio_clamped = ratio.clamp(1.0 - settings.clip_low, 1.0 + settings.clip_high)
    unclipped_loss = -advantages * ratio
    clipped_loss = -advantages * ratio_clamped
    per_token = torch.maximum(unclipped_loss, clipped_loss)
    metrics: dict[str, torch.Tensor] = {}
    if settings.dual_clip_c is not None:
        dual_bound = -settings.dual_clip_c * advantages
        metrics["dual_clipfrac"] = token_mean(((advantages < 0) & (per_token > dual_bound)).to(m.dtype))
        per_token = torch.where(advantages < 0, torch.minimum(per_token, dual_bound), per_token)

    weights = torch.ones_like(per_token)
    if generation_logprobs is not None:
        weights, out_of_bounds = importance_weights(
            old_logprobs, generation_logprobs, m, settings.is_correction, settings.is_cap, settings.is_low
        )
        metrics["token_mult_prob_error"] = token_mean(torch.exp((generation_logprobs - old_logprobs).abs()))
        metrics["is_oob_ratio"] = token_mean(out_of_bounds.to(m.dtype))
    policy_loss = aggregate(weights * per_token, m, aggregation, global_valid_toks, global_valid_seqs)
    loss = policy_loss

    if settings.kl_coef != 0.0:
        if ref_logprobs is None:
            raise ValueError("kl_coef != 0 needs ref_logprobs (the reference policy's logprobs)")
        kl = kl_penalty(logprobs, ref_logprobs, settings.kl_kind)
        kl_weights = weights
        if settings.kl_on_policy_approx:
            if generation_logprobs is None:
                raise ValueError("kl_on_policy_approx needs generation_logprobs")
            kl_weights = torch.exp((logprobs - generation_logprobs).detach().clamp(-20, 20))
        kl_loss = settings.kl_coef * aggregate(kl_weights * kl, m, aggregation, global_valid_toks, global_valid_seqs)
        loss = loss + kl_loss
        metrics["kl_penalty"] = kl_loss.detach()
    if ref_logprobs is not None:
        metrics["kl"] = token_mean(kl_penalty(logprobs, ref_logprobs, settings.kl_kind))

    if settings.nll_coef != 0.0:
        if sequence_rewards is None:
            raise ValueError("nll_coef != 0 (VAPO positive-example NLL) needs sequence_rewards")
        positive = m * (sequence_rewards > 0).to(m.dtype).unsqueeze(-1)
        if global_positive_toks is None:
            global_positive_toks = positive.sum().clamp(min=1)
        nll = masked_sum(-logprobs, positive) / global_positive_toks
        loss = loss + settings.nll_coef * nll
        metrics["positive_nll_loss"] = nll.detach()

    on_policy_weight = 1.0
    if generation_logprobs is not None:
        on_policy_weight = torch.exp((logprobs - generation_logprobs).detach().clamp(-20, 20))
    metrics.update(
        {
            "loss": loss.detach(),
            "policy_loss": policy_loss.detach(),
            "probs_ratio": token_mean(ratio),
            "probs_ratio_clamped": token_mean(ratio_clamped),
            "probs_ratio_min": masked_min(ratio.detach(), m),
            "probs_ratio_max": masked_max(ratio.detach(), m),
            "probs_ratio_clamped_min": masked_min(ratio_clamped.detach(), m),
            "probs_ratio_clamped_max": masked_max(ratio_clamped.detach(), m),
            "clipfrac": token_mean((clipped_loss > unclipped_loss).to(m.dtype)),
            "approx_entropy": token_mean(-logprobs * on_policy_weight),
            "global_valid_toks": torch.as_tensor(global_valid_toks, dtype=torch.float64),
            "global_valid_seqs": torch.as_tensor(global_valid_seqs, dtype=torch.float64),
        }
    )
    return loss, metrics
