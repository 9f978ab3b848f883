"""Token-level rewards from sequence scores: KL in reward, placement, scaling, overlong shaping, whitening."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ppo.algorithms.masked import masked_whiten


def last_trainable_index(mask: torch.Tensor) -> torch.Tensor:
    """Index ``[B]`` of the last position where ``mask`` is 1 in each row (−1 for an empty row)."""
    positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=-1).values


def token_level_rewards(
    sequence_rewards: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    placed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token rewards ``[B, T]``: ``−β·KL_t`` on every trainable token, plus ``R`` on the last trainable token.

    The scalar reward goes to the last position where ``mask`` is 1, not the last position of the row, so padding
    and masked spans after the response never receive it.  Rows with an empty mask get no reward.

    ``placed`` ``[B, T]`` is a part of ``R`` that belongs to given tokens (:func:`answer_char_credit`): it stays on
    them, and the rest of ``R``, ``R − Σ_t placed``, goes to the last token, so each row's total is still ``R``.
    """
    m = mask.to(sequence_rewards.dtype)
    rewards = torch.zeros_like(m)
    if kl is not None and kl_coef != 0.0:
        rewards = rewards - kl_coef * kl.detach().to(rewards.dtype)
    last = last_trainable_index(mask)
    rows = torch.nonzero(last >= 0).squeeze(-1)
    if placed is not None:
        placed = placed.to(rewards.dtype) * m
        rewards = rewards + placed
        sequence_rewards = sequence_rewards - placed.sum(dim=-1)
    rewards[rows, last[rows]] += sequence_rewards[rows]
    return rewards * m


def answer_char_credit(
    responses: Sequence[str],
    ground_truths: Sequence[str],
    response_start: torch.Tensor,
    width: int,
    *,
    weight: float,
) -> torch.Tensor:
    """Partial credit ``[B, width]`` for the characters of an answer that are right: ``weight / len(truth)`` on the
    token of each response character that equals the ground truth's character at the same place.

    Each response must be written one token per character from column ``response_start[b]`` (the arithmetic tasks'
    character tokenizer), so that character ``j`` is token ``response_start[b] + j``.  Characters past the end of
    the truth earn nothing, so a row's credit is ``weight × (matching places) / len(truth)`` at most ``weight``;
    the verifier's exact-match reward is separate and comes on top.
    """
    credit = torch.zeros(len(responses), width)
    for row, (text, truth, start) in enumerate(zip(responses, ground_truths, response_start.tolist())):
        if start + len(text) > width:
            raise ValueError(f"response {text!r} of sample {row} runs past the batch's {width} columns: character "
                             f"credit needs one token per character")
        for j, (said, right) in enumerate(zip(text, truth)):
            if said == right:
                credit[row, start + j] = weight / len(truth)
    return credit


def scale_rewards(
    rewards: torch.Tensor,
    *,
    source_min: float = 0.0,
    source_max: float = 1.0,
    target_min: float = -1.0,
    target_max: float = 1.0,
) -> torch.Tensor:
    """Affine map of ``clamp(R, source_min, source_max)`` onto ``[target_min, target_max]`` (DAPO: {0,1} → {−1,1})."""
    if source_max <= source_min:
        raise ValueError(f"reward scaling needs source_max > source_min, got {source_min}..{source_max}")
    unit = (rewards.clamp(source_min, source_max) - source_min) / (source_max - source_min)
    return target_min + unit * (target_max - target_min)


def overlong_penalty(
    lengths: torch.Tensor,
    *,
    max_response_length: int,
    buffer_length: int,
    penalty_factor: float = 1.0,
) -> torch.Tensor:
    """DAPO's soft overlong punishment ``[B]``, to add to ``R``: 0 up to ``max − buffer`` tokens, then linear.

    ``min(−(len − exp_len)/buffer · penalty_factor, 0)`` with ``exp_len = max_response_length − buffer_length``.
    """
    if not 0 < buffer_length <= max_response_length:
        raise ValueError(f"overlong buffer {buffer_length} must be in (0, max_response_length={max_response_length}]")
    expected = max_response_length - buffer_length
    return (-(lengths.to(torch.float32) - expected) / buffer_length * penalty_factor).clamp(max=0.0)


def whiten_rewards(rewards: torch.Tensor, mask: torch.Tensor, *, shift_mean: bool = True) -> torch.Tensor:
    """Per-token reward whitening over the mask (TRL style), separate from advantage whitening."""
    return masked_whiten(rewards, mask, shift_mean=shift_mean) * mask


def shape_rewards(batch, shaping, *, max_new_tokens: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A scored rollout batch's sequence rewards ``[B]`` after ``shaping`` (a
    :class:`ppo.loop.settings.RewardShaping`): the scores scaled, the overlong penalty added, and with ``char_credit``
    the answer's right characters; returns ``(R, credit)``, ``credit`` the per-token part of R ``[B, T]`` (for
    :func:`token_level_rewards`'s ``placed``), or None.

    ``batch``: a :class:`ppo.data.batch.Batch` (read by attribute: this layer sits below the batch's package)."""
    rewards = batch.scores.clone()
    if shaping.scale:
        rewards = scale_rewards(rewards, source_min=shaping.source_min, source_max=shaping.source_max,
                                target_min=shaping.target_min, target_max=shaping.target_max)
    if shaping.overlong_buffer:
        rewards += overlong_penalty(batch.response_lengths, buffer_length=shaping.overlong_buffer,
                                    max_response_length=max_new_tokens, penalty_factor=shaping.overlong_penalty)
    credit = None
    if shaping.char_credit:
        credit = answer_char_credit(batch.responses, batch.ground_truths, batch.prompt_lengths, batch.width,
                                    weight=shaping.char_credit)
        rewards += credit.sum(dim=-1)
    return rewards, credit
