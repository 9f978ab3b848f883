"""The advantage estimators' settings: which estimator, its parameters, and what it needs from the loop.

These are experiment components (``fdl.Config(GAE, lam=0.95)``) and import no torch, so configuring one, or a dry
run, stays torch-free.  The tensor code that computes each one sits beside them in :mod:`ppo.algorithms.advantages`
(``estimate_advantages(estimator, ...)``).

What the loop reads: ``needs_critic`` (train a critic and pass its values), ``uses_token_rewards`` (the per-token
rewards, with a KL-in-reward term, reach the advantages) and ``needs_groups`` (a baseline from the other samples of
the same prompt).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import ClassVar


def _check_unit_interval(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


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
    uses_token_rewards: ClassVar[bool] = True
    needs_groups: ClassVar[bool] = False

    def __post_init__(self):
        for name in ("gamma", "lam", "lam_value", "lam_policy"):
            _check_unit_interval(f"GAE {name}", getattr(self, name))
        if self.length_adaptive_alpha < 0:
            raise ValueError(f"GAE length_adaptive_alpha must be >= 0, got {self.length_adaptive_alpha}")

    @property
    def decoupled(self) -> bool:
        return self.lam_value is not None or self.lam_policy is not None or self.length_adaptive_alpha > 0


@dataclass
class RawReward:
    """``A = R`` on every trainable token (optionally whitened over the batch); no critic."""

    normalize: bool = False
    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = False


@dataclass
class GRPO:
    """Group-normalised rewards: ``A_i = (R_i − mean_group)/(std_group + ε)`` (std division optional)."""

    normalize_std: bool = True
    eps: float = 1e-6
    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = True


@dataclass
class RLOO:
    """REINFORCE leave-one-out: ``A_i = R_i − mean_{j≠i} R_j`` within the prompt's group (groups of ≥ 2)."""

    needs_critic: ClassVar[bool] = False
    uses_token_rewards: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = True


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
