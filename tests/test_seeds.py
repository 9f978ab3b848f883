"""The run's seed derivation: deterministic, one stream per purpose and position, no accidental collisions."""

import itertools

import pytest

from ppo.seeds import PURPOSES, derive_seed


def test_the_same_purpose_and_position_give_the_same_seed_in_every_process():
    """Pinned values: a derivation that drifted between processes, machines or releases (Python's salted ``hash``,
    a renumbered purpose) changes them, and with them every resumed run's draws."""
    assert derive_seed(3, "sampling", 7, 1) == 3130183522
    assert derive_seed(0, "minibatch_order", 1) == 1961547765
    assert derive_seed(12345, "sampling", 0, 0) == 671067976


def test_streams_differ_by_seed_purpose_and_position_where_offset_arithmetic_collided():
    # seed * 1_000_003 + step * 101 + attempt gave (step 0, attempt 101) and (step 1, attempt 0) the same seed
    grid = [(seed, purpose, step, attempt) for seed in range(3) for purpose in PURPOSES
            for step, attempt in itertools.product(range(120), (0, 1, 101))]
    seeds = {derive_seed(seed, purpose, step, attempt) for seed, purpose, step, attempt in grid}
    assert len(seeds) == len(grid)


def test_an_unknown_purpose_or_a_negative_position_is_refused():
    with pytest.raises(ValueError, match="unknown seed purpose 'sampler'; known: sampling, minibatch_order"):
        derive_seed(0, "sampler", 1)
    with pytest.raises(ValueError, match="non-negative integers"):
        derive_seed(0, "sampling", -1)
