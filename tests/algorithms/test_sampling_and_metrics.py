import pytest
import torch

from ppo.algorithms import dynamic_sampling_mask, group_mean_std, reduce_microbatch_metrics


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
    out = reduce_microbatch_metrics(pieces)
    assert out == {"loss": 0.75, "probs_ratio_min": 0.8, "probs_ratio_max": 1.1, "lr": 1e-6, "reward": 0.5,
                   "global_valid_toks": 10.0}
