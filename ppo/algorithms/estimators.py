"""Advantage estimators behind one interface, so the PPO loop can use any of them.

Each estimator is called as::

    advantages, returns = estimator(token_rewards=r, mask=m, values=V, sequence_rewards=R, group_ids=g)

with ``r, m, V`` ``[B, T]``, ``R`` the scalar reward per sample ``[B]`` and ``g`` ``[B]`` integer ids of the
prompt each sample answers (samples of one prompt form a group).  ``returns`` is the critic's target, or ``None``
for estimators that need no critic (``needs_critic`` is False).  Advantages are zero off the mask.

The estimators are also experiment components (``fdl.Config(GAE, lam=0.95)``), so this module imports torch and
the tensor math only inside the functions that compute: configuring one, or a dry run, stays torch-free.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch


def _check_unit_interval(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def group_mean_std(values: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample mean, unbiased std and size of the sample's group (std is 0 for a group of one)."""
    import torch

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


def _broadcast(per_sample: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(per_sample.dtype)
    return per_sample.unsqueeze(-1) * m


@dataclass
class GAE:
    """PPO's estimator: GAE over the critic's values, with VAPO's decoupled and length-adaptive λ.

    λ_value = ``lam_value`` if set, else ``lam``.  λ_policy = the length-adaptive λ if ``length_adaptive_alpha`` > 0,
    else ``lam_policy`` if set, else ``lam``.  If any of the three is set, GAE runs twice: the returns (critic
    targets) come from the λ_value run, the advantages from the λ_policy run.  VAPO: ``lam_value=1.0``,
    ``length_adaptive_alpha=0.05``.
    """

    gamma: float = 1.0
    lam: float = 0.95
    lam_value: float | None = None
    lam_policy: float | None = None
    length_adaptive_alpha: float = 0.0
    whiten_advantages: bool = True

    needs_critic: ClassVar[bool] = True
    uses_token_rewards: ClassVar[bool] = True  # the per-token rewards (and a KL-in-reward term) reach the advantages
    needs_groups: ClassVar[bool] = False  # a baseline from the other samples of the same prompt

    def __post_init__(self):
        for name in ("gamma", "lam", "lam_value", "lam_policy"):
            _check_unit_interval(f"GAE {name}", getattr(self, name))
        if self.length_adaptive_alpha < 0:
            raise ValueError(f"GAE length_adaptive_alpha must be >= 0, got {self.length_adaptive_alpha}")

    @property
    def decoupled(self) -> bool:
        return self.lam_value is not None or self.lam_policy is not None or self.length_adaptive_alpha > 0

    def policy_lambda(self, mask: torch.Tensor) -> float | torch.Tensor:
        from ppo.algorithms.gae import length_adaptive_lambda

        if self.length_adaptive_alpha > 0:
            return length_adaptive_lambda(mask.sum(-1), self.length_adaptive_alpha)
        return self.lam_policy if self.lam_policy is not None else self.lam

    def __call__(self, *, token_rewards, mask, values, sequence_rewards=None, group_ids=None):
        from ppo.algorithms.gae import compute_gae
        from ppo.algorithms.masked import masked_whiten

        if values is None:
            raise ValueError("the GAE estimator needs the critic's values")
        value_lam = self.lam_value if self.lam_value is not None else self.lam
        advantages, returns = compute_gae(token_rewards, values, mask, gamma=self.gamma, lam=value_lam)
        if self.decoupled:
            advantages, _ = compute_gae(token_rewards, values, mask, gamma=self.gamma, lam=self.policy_lambda(mask))
        if self.whiten_advantages:
            advantages = masked_whiten(advantages, mask) * mask
        return advantages, returns


@dataclass
class RawReward:
    """``A = R`` on every trainable token (optionally whitened over the batch); no critic."""

    normalize: bool = False
    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = False

    def __call__(self, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
        import torch

        from ppo.algorithms.masked import masked_whiten

        rewards = sequence_rewards
        if self.normalize:
            rewards = masked_whiten(rewards, torch.ones_like(rewards))
        return _broadcast(rewards, mask), None


@dataclass
class GRPO:
    """Group-normalised rewards: ``A_i = (R_i − mean_group)/(std_group + ε)`` (std division optional)."""

    normalize_std: bool = True
    eps: float = 1e-6
    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = True

    def __call__(self, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
        mean, std, _ = group_mean_std(sequence_rewards, group_ids)
        advantages = sequence_rewards - mean
        if self.normalize_std:
            advantages = advantages / (std + self.eps)
        return _broadcast(advantages, mask), None


@dataclass
class RLOO:
    """REINFORCE leave-one-out: ``A_i = R_i − mean_{j≠i} R_j`` within the prompt's group (groups of ≥ 2)."""

    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = True

    def __call__(self, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
        mean, _, count = group_mean_std(sequence_rewards, group_ids)
        if bool((count < 2).any()):
            raise ValueError("RLOO needs at least 2 samples per prompt (num_generations_per_prompt >= 2)")
        leave_one_out = (mean * count - sequence_rewards) / (count - 1)
        return _broadcast(sequence_rewards - leave_one_out, mask), None


@dataclass
class ReinforcePlusPlus:
    """REINFORCE++: discounted return-to-go of the token rewards, whitened over the batch.

    The token rewards carry the KL-in-reward term.  With ``baseline=True`` the group mean of ``R`` is subtracted
    from ``R`` before it is placed on the last token (the "REINFORCE++-baseline" variant).
    """

    gamma: float = 1.0
    baseline: bool = False
    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = True

    @property
    def needs_groups(self) -> bool:
        return self.baseline

    def __post_init__(self):
        _check_unit_interval("ReinforcePlusPlus gamma", self.gamma)

    def __call__(self, *, token_rewards, mask, values=None, sequence_rewards=None, group_ids=None):
        import torch

        from ppo.algorithms.gae import compute_gae
        from ppo.algorithms.masked import masked_whiten
        from ppo.algorithms.rewards import token_level_rewards

        rewards = token_rewards
        if self.baseline:
            mean, _, _ = group_mean_std(sequence_rewards, group_ids)
            rewards = rewards - token_level_rewards(mean, mask)
        # return-to-go is GAE with V = 0 and λ = 1 (same carry-forward over masked gaps)
        returns, _ = compute_gae(rewards, torch.zeros_like(rewards), mask, gamma=self.gamma, lam=1.0)
        return masked_whiten(returns, mask) * mask, None


ESTIMATORS = {
    "gae": GAE,
    "raw_reward": RawReward,
    "grpo": GRPO,
    "rloo": RLOO,
    "reinforce++": ReinforcePlusPlus,
    "reinforce++_baseline": lambda **kw: ReinforcePlusPlus(baseline=True, **kw),
}


def make_advantage_estimator(name: str, **kwargs):
    """Build an estimator by name: ``gae``, ``raw_reward``, ``grpo``, ``rloo``, ``reinforce++``,
    ``reinforce++_baseline``."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        close = difflib.get_close_matches(name, ESTIMATORS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown advantage estimator {name!r}{hint}; choose one of {', '.join(ESTIMATORS)}") from None
    return factory(**kwargs)
