"""A PPO step's metrics from what the step produced: pure functions of the batch, the advantages and the workers'
optimizer-step records (the names are docs/ppo.md's, section "Metrics")."""

from __future__ import annotations

import torch

from ppo.algorithms.critic_loss import explained_variance
from ppo.algorithms.masked import masked_mean
from ppo.algorithms.reduction import between_prompt_share, reduce_metrics
from ppo.data.batch import Batch
from ppo.workers.traffic import nbytes


def update_metrics(policy_steps: list[dict], critic_steps: list[dict], *, has_critic: bool,
                   policy_updated: bool) -> dict[str, float]:
    """The policy's and the critic's optimizer steps, averaged over the step (``train/…``, ``train/critic/…``)."""
    metrics = reduce_metrics(policy_steps, over="steps", prefix="train/")
    metrics.update(reduce_metrics(critic_steps, over="steps", prefix="train/critic/"))
    metrics["train/policy_updated"] = float(policy_updated)
    metrics["train/optimizer_steps"] = float(len(policy_steps))
    if has_critic:
        metrics["train/critic/optimizer_steps"] = float(len(critic_steps))
    metrics["train/skipped_updates"] = skipped_updates(policy_steps + critic_steps)
    return metrics


def skipped_updates(steps: list[dict]) -> float:
    """Optimizer steps skipped for NaN/Inf gradients."""
    return float(sum(step.get("skipped", 0.0) for step in steps))


def batch_metrics(batch: Batch, advantages: torch.Tensor, returns: torch.Tensor | None, *,
                  overlong_filter: bool) -> dict[str, float]:
    """What the batch was: rewards (shaped, and the share a prompt alone explains), lengths, advantages, and, with
    a critic, how much of the returns its values explain."""
    mask = batch.response_mask
    metrics = {"train/shaped_reward": batch.rewards.mean().item()}
    share = between_prompt_share(batch.rewards, batch.group_ids)
    if share is not None:  # what a critic could explain from the prompt alone (compare critic/explained_var)
        metrics["train/reward_between_prompt_share"] = share
    if overlong_filter:
        metrics["train/overlong_filtered"] = batch.truncated.float().mean().item()
    metrics["train/advantages/mean"] = masked_mean(advantages, mask).item()
    trained = advantages[mask.bool()]
    metrics["train/advantages/min"] = trained.min().item() if trained.numel() else 0.0
    metrics["train/advantages/max"] = trained.max().item() if trained.numel() else 0.0
    metrics["train/mean_gen_tokens_per_sample"] = batch.response_lengths.float().mean().item()
    metrics["train/mean_prompt_length"] = batch.prompt_lengths.float().mean().item()
    metrics["train/batch_bytes"] = float(sum(nbytes(v) for v in batch.fields().values()))
    if returns is not None:
        values = batch.values
        moments = {
            "returns_mean": masked_mean(returns, mask), "returns_sq_mean": masked_mean(returns**2, mask),
            "values_mean": masked_mean(values, mask),
            "residual_sq_mean": masked_mean((returns - values) ** 2, mask),
        }
        metrics["train/critic/explained_var"] = explained_variance(**moments).item()
        metrics["train/critic/returns_mean"] = moments["returns_mean"].item()
    return metrics


def environment_metrics(env_metrics: dict[str, float]) -> dict[str, float]:
    """The math environment's metrics of every sample generated (before dynamic sampling's filter)."""
    metrics = {"train/reward": env_metrics["reward_all_attempts"]}
    metrics.update({f"train/env/{k}": v for k, v in env_metrics.items() if k != "reward_all_attempts"})
    return metrics
