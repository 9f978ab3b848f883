"""The advantage estimators' tensor code: one call for every estimator of :mod:`ppo.algorithms.estimators`.

    advantages, returns = estimate_advantages(estimator, token_rewards=r, mask=m, values=V, sequence_rewards=R,
                                              group_ids=g)

with ``r, m, V`` ``[B, T]``, ``R`` the scalar reward per sample ``[B]`` and ``g`` ``[B]`` integer ids of the
prompt each sample answers (samples of one prompt form a group).  ``returns`` is the critic's target, or ``None``
for estimators that need no critic (``needs_critic`` is False).  Advantages are zero off the mask.
"""

from __future__ import annotations

from functools import singledispatch

import torch

from ppo.algorithms.estimators import GAE, GRPO, RLOO, RawReward, ReinforcePlusPlus
from ppo.algorithms.gae import compute_gae, length_adaptive_lambda
from ppo.algorithms.groups import group_mean_std
from ppo.algorithms.masked import masked_whiten
from ppo.algorithms.rewards import token_level_rewards


def _broadcast(per_sample: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return per_sample.unsqueeze(-1) * mask.to(per_sample.dtype)


def policy_lambda(estimator: GAE, mask: torch.Tensor) -> float | torch.Tensor:
    """GAE's λ for the advantages: length-adaptive per sample, else ``lam_policy``, else ``lam``."""
    if estimator.length_adaptive_alpha > 0:
        return length_adaptive_lambda(mask.sum(-1), estimator.length_adaptive_alpha)
    return estimator.lam_policy if estimator.lam_policy is not None else estimator.lam


@singledispatch
def estimate_advantages(estimator, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    """``(advantages [B, T], returns [B, T] or None)`` from ``estimator``'s settings (see the module docstring)."""
    raise TypeError(f"no advantage computation for {type(estimator).__name__}")


@estimate_advantages.register
def _(estimator: GAE, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    if values is None:
        raise ValueError("the GAE estimator needs the critic's values")
    value_lam = estimator.lam_value if estimator.lam_value is not None else estimator.lam
    advantages, returns = compute_gae(token_rewards, values, mask, gamma=estimator.gamma, lam=value_lam)
    if estimator.decoupled:
        advantages, _ = compute_gae(token_rewards, values, mask, gamma=estimator.gamma,
                                    lam=policy_lambda(estimator, mask))
    if estimator.whiten_advantages:
        advantages = masked_whiten(advantages, mask) * mask
    return advantages, returns


@estimate_advantages.register
def _(estimator: RawReward, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    rewards = sequence_rewards
    if estimator.normalize:
        rewards = masked_whiten(rewards, torch.ones_like(rewards))
    return _broadcast(rewards, mask), None


@estimate_advantages.register
def _(estimator: GRPO, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    mean, std, _ = group_mean_std(sequence_rewards, group_ids)
    advantages = sequence_rewards - mean
    if estimator.normalize_std:
        advantages = advantages / (std + estimator.eps)
    return _broadcast(advantages, mask), None


@estimate_advantages.register
def _(estimator: RLOO, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    mean, _, count = group_mean_std(sequence_rewards, group_ids)
    if bool((count < 2).any()):
        raise ValueError("RLOO needs at least 2 samples per prompt (num_generations_per_prompt >= 2)")
    leave_one_out = (mean * count - sequence_rewards) / (count - 1)
    return _broadcast(sequence_rewards - leave_one_out, mask), None


@estimate_advantages.register
def _(estimator: ReinforcePlusPlus, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
    rewards = token_rewards
    if estimator.baseline:
        mean, _, _ = group_mean_std(sequence_rewards, group_ids)
        rewards = rewards - token_level_rewards(mean, mask)
    # return-to-go is GAE with V = 0 and λ = 1 (same carry-forward over masked gaps)
    returns, _ = compute_gae(rewards, torch.zeros_like(rewards), mask, gamma=estimator.gamma, lam=1.0)
    return masked_whiten(returns, mask) * mask, None
