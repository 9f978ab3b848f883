"""PPO mathematics as pure tensor functions: no I/O, no distributed state.

    from ppo.algorithms import compute_gae, kl_penalty, length_adaptive_lambda, clipped_pg_loss, value_loss

The names below are loaded on first use (module-level ``__getattr__``), and the estimator classes
(:mod:`~ppo.algorithms.estimators`: ``GAE``, ``RawReward``, ...) import torch only when they compute: an experiment
file can configure an estimator, and ``launch.py --dry-run`` can show it, without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ESTIMATORS": "estimators", "GAE": "estimators", "GRPO": "estimators", "RLOO": "estimators",
    "RawReward": "estimators", "ReinforcePlusPlus": "estimators", "group_mean_std": "estimators",
    "make_advantage_estimator": "estimators",
    "compute_gae": "gae", "compute_gae_loop": "gae", "length_adaptive_lambda": "gae",
    "KL_KINDS": "kl", "KLController": "kl", "adaptive_kl_coef": "kl", "kl_penalty": "kl",
    "masked_mean": "masked", "masked_sum": "masked", "masked_var": "masked", "masked_whiten": "masked",
    "reduce_metrics": "metrics",
    "clipped_pg_loss": "policy_loss", "importance_weights": "policy_loss",
    "last_trainable_index": "rewards", "overlong_penalty": "rewards", "scale_rewards": "rewards",
    "token_level_rewards": "rewards", "whiten_rewards": "rewards",
    "dynamic_sampling_mask": "sampling",
    "explained_variance": "critic_loss", "value_loss": "critic_loss",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ppo.algorithms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ppo.algorithms.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
