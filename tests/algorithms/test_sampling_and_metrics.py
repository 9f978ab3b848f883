import math
import subprocess
import sys

import pytest
import torch

from ppo.algorithms.groups import group_mean_std
from ppo.algorithms.reduction import between_prompt_share, mean_by_group, reduce_metrics
from ppo.algorithms.sampling import dynamic_sampling_mask


def test_dynamic_sampling_drops_all_equal_groups():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5])
    groups = torch.tensor([7, 7, 7, 3, 3, 9, 9, 9, 4])
    keep = dynamic_sampling_mask(rewards, groups)
    assert keep.tolist() == [False, False, False, True, True, False, False, False, False]


def test_group_stats_with_unsorted_ids():
    mean, std, count = group_mean_std(torch.tensor([1.0, 5.0, 3.0, 2.0]), torch.tensor([2, 0, 2, 0]))
    assert mean.tolist() == [2.0, 3.5, 2.0, 3.5]
    assert count.tolist() == [2, 2, 2, 2]
    assert std[0].item() == pytest.approx(2**0.5) and std[1].item() == pytest.approx(4.5**0.5)


def test_reduction_rules():
    pieces = [
        {"loss": 0.25, "probs_ratio_min": 0.9, "probs_ratio_max": 1.1, "lr": 1e-6, "reward": 1.0,
         "global_valid_toks": 10.0},
        {"loss": 0.5, "probs_ratio_min": 0.8, "probs_ratio_max": 1.05, "lr": 1e-6, "reward": 0.0,
         "global_valid_toks": 10.0},
    ]
    out = reduce_metrics(pieces, over="microbatches")
    assert out == {"loss": 0.75, "probs_ratio_min": 0.8, "probs_ratio_max": 1.1, "lr": 1e-6, "reward": 0.5,
                   "global_valid_toks": 10.0}


def test_microbatch_tensors_moments_and_prefix():
    """Tensors become floats; ``explained_var`` comes from the summed moments, not from the pieces' values."""
    pieces = [
        {"loss": torch.tensor(0.25), "returns_mean": 0.5, "returns_sq_mean": 0.5, "values_mean": 0.25,
         "residual_sq_mean": 0.25, "explained_var": -7.0},
        {"loss": torch.tensor(0.5, dtype=torch.float64), "returns_mean": 0.25, "returns_sq_mean": 0.25,
         "values_mean": 0.25, "residual_sq_mean": 0.0, "explained_var": -7.0},
    ]
    out = reduce_metrics(pieces, over="microbatches", prefix="train/critic/")
    assert list(out) == ["train/critic/" + k for k in pieces[0]]
    assert out["train/critic/loss"] == 0.75 and isinstance(out["train/critic/loss"], float)
    # E R = 0.75, E R² = 0.75, E V = 0.5, E(R−V)² = 0.25: EV = 1 − (0.25 − 0.0625) / (0.75 − 0.5625) = 0
    assert out["train/critic/explained_var"] == pytest.approx(0.0)


def test_optimizer_steps_are_averaged_except_min_and_max():
    """Over the optimizer steps of a PPO step everything is a mean, counts and ``explained_var`` included, in step
    order on the floats; a metric some steps lack is averaged over the steps that have it."""
    steps = [
        {"loss": 0.1, "probs_ratio_min": 0.9, "probs_ratio_max": 1.1, "lr": 1e-6, "global_valid_toks": 10.0,
         "explained_var": 0.5, "grad_norm": 2.0},
        {"loss": 0.2, "probs_ratio_min": 0.8, "probs_ratio_max": 1.3, "lr": 2e-6, "global_valid_toks": 14.0,
         "explained_var": 0.1, "grad_norm": 4.0, "skipped": 1.0},
        {"loss": 0.4, "probs_ratio_min": 0.95, "probs_ratio_max": 1.2, "lr": 3e-6, "global_valid_toks": 12.0,
         "explained_var": 0.3, "grad_norm": 3.0},
    ]
    out = reduce_metrics(steps, over="steps", prefix="train/")
    assert out == {
        "train/loss": (0.1 + 0.2 + 0.4) / 3, "train/probs_ratio_min": 0.8, "train/probs_ratio_max": 1.3,
        "train/lr": (1e-6 + 2e-6 + 3e-6) / 3, "train/global_valid_toks": 12.0,
        "train/explained_var": (0.5 + 0.1 + 0.3) / 3, "train/grad_norm": 3.0, "train/skipped": 1.0,
    }
    assert reduce_metrics([], over="steps", prefix="train/") == {}
    assert math.isnan(reduce_metrics([{"loss": 1.0}, {"loss": float("nan")}], over="steps")["loss"])
    with pytest.raises(ValueError, match="over must be one of"):
        reduce_metrics(steps, over="epochs")


def test_mean_by_group_averages_within_each_named_group_only():
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    groups = ["2-digit", "1-digit", None, "2-digit", "2-digit", "1-digit"]
    assert mean_by_group(values, groups) == {"1-digit": 0.5, "2-digit": pytest.approx(2 / 3)}
    assert mean_by_group(values, [None] * 6) == {}
    with pytest.raises(ValueError, match="6 values but 5 groups"):
        mean_by_group(values, groups[:5])


def test_between_prompt_share_is_the_variance_of_the_prompt_means_over_the_batch():
    """Against a float64 loop: 1 − mean within-prompt variance / batch variance (both unbiased)."""
    g = torch.Generator().manual_seed(0)
    success = torch.rand(32, generator=g)  # each prompt's p
    group_ids = torch.arange(32).repeat_interleave(4)
    rewards = (torch.rand(128, generator=g) < success[group_ids]).float()

    def unbiased_var(xs):
        mean = sum(xs) / len(xs)
        return sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)

    values = rewards.tolist()
    within = [unbiased_var(values[4 * i: 4 * i + 4]) for i in range(32)]
    expected = 1 - (sum(within) / 32) / unbiased_var(values)
    assert between_prompt_share(rewards, group_ids) == pytest.approx(expected, rel=1e-12)
    assert expected > 0.2  # prompts of p spread over [0, 1] differ: Var(p) = 1/12 of Var(R) = 1/4 (0.32 here)

    same = (torch.rand(128, generator=g) < 0.5).float()  # every prompt alike: around 0 (negative by chance)
    assert abs(between_prompt_share(same, group_ids)) < 0.15
    assert between_prompt_share(torch.ones(128), group_ids) is None  # no variance
    assert between_prompt_share(rewards, torch.arange(128)) is None  # one sample per prompt


@pytest.mark.slow
def test_the_megatron_workers_leave_the_numba_gae_scan_out():
    """The workers reduce their metrics with :func:`group_mean_std`; importing it must not import the estimators'
    numba scan (0.7 s of every worker's start; only the driver computes advantages)."""
    probe = "import sys, ppo.models.training, ppo.workers.policy, ppo.workers.value; print('numba' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"
