"""Combining metric dicts into the step's metrics: the micro-batches (and data-parallel ranks) of one optimizer step,
then the optimizer steps of one PPO step (:func:`reduce_metrics`).

Over **micro-batches**, loss functions return pieces already divided by the global counts, so most metrics are
**sums**.  The exceptions, by name: ``*_min`` take the min, ``*_max`` the max, ``lr`` and ``reward`` are averaged,
the ``global_valid_*`` counts are the same on every piece, and ``explained_var`` is recomputed from the summed
moments.  Over **optimizer steps** every metric is the **mean** of the steps' values, except ``*_min`` (min) and
``*_max`` (max).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch

from ppo.algorithms.critic_loss import explained_variance
from ppo.algorithms.groups import group_mean_std

AVERAGED = ("lr", "reward")
SHARED = ("global_valid_toks", "global_valid_seqs")
EV_MOMENTS = ("returns_mean", "returns_sq_mean", "values_mean", "residual_sq_mean")
OVER = ("microbatches", "steps")


def reduce_metrics(
    pieces: Iterable[Mapping[str, torch.Tensor | float]], *, over: str, prefix: str = ""
) -> dict[str, float]:
    """One dict of floats from several metric dicts (see the module docstring); ``prefix`` is put before every name.

    ``over="microbatches"``: the pieces of one optimizer step, tensors or floats, combined in float64.
    ``over="steps"``: the dicts this function returned for each optimizer step (floats), averaged in step order.
    A metric missing from some pieces is combined over the pieces that have it.
    """
    if over not in OVER:
        raise ValueError(f"over must be one of {OVER}, got {over!r}")
    pieces = list(pieces)
    combine = _over_steps if over == "steps" else _over_microbatches
    reduced = {
        key: combine(key, [p[key] for p in pieces if key in p]) for key in dict.fromkeys(k for p in pieces for k in p)
    }
    if over == "microbatches" and "explained_var" in reduced and all(k in reduced for k in EV_MOMENTS):
        moments = {k: torch.tensor(reduced[k], dtype=torch.float64) for k in EV_MOMENTS}
        reduced["explained_var"] = explained_variance(**moments).item()
    return {prefix + key: value for key, value in reduced.items()}


def _over_microbatches(key: str, values: list[torch.Tensor | float]) -> float:
    stacked = torch.stack([torch.as_tensor(v, dtype=torch.float64).detach().cpu() for v in values])
    if key.endswith("_min"):
        return stacked.min().item()
    if key.endswith("_max") or key in SHARED:
        return stacked.max().item()
    if key in AVERAGED:
        return stacked.mean().item()
    return stacked.sum().item()


def _over_steps(key: str, values: list[float]) -> float:
    if key.endswith("_min"):
        return min(values)
    if key.endswith("_max"):
        return max(values)
    return sum(values) / len(values)


def mean_by_group(values: Sequence[float], groups: Sequence[str | None]) -> dict[str, float]:
    """The mean of ``values`` within each named group (``None``: in no group), e.g. held-out accuracy per problem
    size."""
    if len(values) != len(groups):
        raise ValueError(f"{len(values)} values but {len(groups)} groups")
    members: dict[str, list[float]] = {}
    for value, group in zip(values, groups):
        if group is not None:
            members.setdefault(group, []).append(value)
    return {group: sum(vs) / len(vs) for group, vs in sorted(members.items())}


def between_prompt_share(rewards: torch.Tensor, group_ids: torch.Tensor) -> float | None:
    """The share of the rewards' variance that lies between prompts: ``1 − within / total``, where ``within`` is the
    mean over prompts of the unbiased variance of each prompt's samples and ``total`` the unbiased variance over the
    batch.

    It estimates ``Var(p) / Var(R)`` (``p`` a prompt's success rate): the explained variance of a value function
    that knows each prompt's ``p`` and nothing of the answer, read at the answer's first token — the part of the
    return a critic can learn from the prompt alone (and what GRPO's group mean uses).  A critic above it must also
    judge the partial answer.  Noisy with few samples a prompt, and below 0 when prompts do not differ.  ``None``
    when the rewards do not vary or no prompt has two samples.
    """
    rewards = rewards.double()
    _, std, count = group_mean_std(rewards, group_ids)
    paired = count > 1  # each group's variance once: its samples' std² / count summed, over its 1 / count summed
    total = rewards.var() if rewards.numel() > 1 else rewards.new_tensor(0.0)
    if not paired.any() or total <= 0:
        return None
    within = (std[paired] ** 2 / count[paired]).sum() / (1.0 / count[paired]).sum()
    return float(1.0 - within / total)
