"""PPO mathematics as pure tensor functions: no I/O, no distributed state.

    from ppo.algorithms import compute_gae, kl_penalty, length_adaptive_lambda, clipped_pg_loss, value_loss
"""

from ppo.algorithms.estimators import (
    ESTIMATORS,
    GAE,
    GRPO,
    RLOO,
    RawReward,
    ReinforcePlusPlus,
    group_mean_std,
    make_advantage_estimator,
)
from ppo.algorithms.gae import compute_gae, compute_gae_loop, length_adaptive_lambda
from ppo.algorithms.kl import KL_KINDS, KLController, adaptive_kl_coef, kl_penalty
from ppo.algorithms.masked import masked_mean, masked_sum, masked_var, masked_whiten
from ppo.algorithms.metrics import reduce_microbatch_metrics
from ppo.algorithms.policy_loss import clipped_pg_loss, importance_weights
from ppo.algorithms.rewards import (
    last_trainable_index,
    overlong_penalty,
    scale_rewards,
    token_level_rewards,
    whiten_rewards,
)
from ppo.algorithms.sampling import dynamic_sampling_mask
from ppo.algorithms.value_loss import explained_variance, value_loss

__all__ = [
    "ESTIMATORS",
    "GAE",
    "GRPO",
    "KL_KINDS",
    "KLController",
    "RLOO",
    "RawReward",
    "ReinforcePlusPlus",
    "adaptive_kl_coef",
    "clipped_pg_loss",
    "compute_gae",
    "compute_gae_loop",
    "dynamic_sampling_mask",
    "explained_variance",
    "group_mean_std",
    "importance_weights",
    "kl_penalty",
    "last_trainable_index",
    "length_adaptive_lambda",
    "make_advantage_estimator",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "overlong_penalty",
    "reduce_microbatch_metrics",
    "scale_rewards",
    "token_level_rewards",
    "value_loss",
    "whiten_rewards",
]
