"""Trial ids: deterministic, independent of dict order and of where trials run, and stable when a sweep grows."""

import pytest

from ppo.config.errors import ConfigError
from ppo.sweep.spec import load_sweep
from ppo.sweep.trials import config_id, make_trials, trial_id
from tests.sweep.conftest import write_sweep


def test_ids_are_a_hash_of_sorted_overrides_and_seed():
    a = trial_id({"x": 1, "y": 0.5}, 0)
    assert a == trial_id({"y": 0.5, "x": 1}, 0)
    assert len(a) == 10 and int(a, 16) >= 0
    assert a != trial_id({"x": 1, "y": 0.5}, 1)
    assert a != trial_id({"x": 1.0, "y": 0.5}, 0)  # 1 and 1.0 are different overrides
    assert a != trial_id({"x": 1, "y": 0.5}, 0, common=["steps=3"])
    assert a != trial_id({"x": 1, "y": 0.5}, 0, fiddlers=["big_lr"])
    # where a trial runs is not what it trains
    assert a == trial_id({"x": 1, "y": 0.5}, 0, common=["executor.partition='gpu'", "executor=None"])
    assert config_id({"x": 1}) == config_id({"x": 1}) != config_id({"x": 2})
    # a known value, so a change of the hashing shows up here (it would orphan every existing sweep's trials)
    assert trial_id({"advantage.lam": 0.95}, 0) == "9450e24fed"


def test_trials_expand_points_times_seeds_and_keep_their_ids_when_the_sweep_grows(tmp_path):
    small = load_sweep(write_sweep(tmp_path / "s1.py", 'axes=[Grid({"lam": [0.9, 0.95]})], seeds=[0, 1], '
                                                       'metric="train/reward", step=4'))
    big = load_sweep(write_sweep(tmp_path / "s2.py", 'axes=[Grid({"lam": [0.9, 0.95, 1.0]})], seeds=[0, 1, 2], '
                                                     'metric="train/reward", step=4'))
    small_trials, big_trials = make_trials(small), make_trials(big)
    assert [(t.point, t.seed) for t in small_trials] == [({"lam": 0.9}, 0), ({"lam": 0.9}, 1),
                                                          ({"lam": 0.95}, 0), ({"lam": 0.95}, 1)]
    assert {t.id for t in small_trials} < {t.id for t in big_trials}
    assert small_trials[0].config_id == small_trials[1].config_id != small_trials[2].config_id
    assert small_trials[1].overrides == ("lam=0.9", "seed=1")
    assert [t.index for t in big_trials] == list(range(9))


def test_common_overrides_come_first_and_change_ids(tmp_path):
    plain = make_trials(load_sweep(write_sweep(tmp_path / "a.py", 'axes=[Grid({"lam": [0.9]})], '
                                                                  'metric="m", step=1')))
    with_common = make_trials(load_sweep(write_sweep(tmp_path / "b.py", 'axes=[Grid({"lam": [0.9]})], '
                                                                        'overrides=["steps=4"], metric="m", step=1')))
    assert with_common[0].overrides == ("steps=4", "lam=0.9", "seed=0")
    assert plain[0].id != with_common[0].id
    extra = make_trials(load_sweep(tmp_path / "a.py"), ["executor.env={'A': 'b'}"])
    assert extra[0].id == plain[0].id and extra[0].overrides[0] == "executor.env={'A': 'b'}"


def test_duplicates_seed_axes_and_the_trial_budget_are_refused(tmp_path):
    dup = write_sweep(tmp_path / "dup.py", 'axes=[Points([{"lam": 0.9}, {"lam": 0.9}])], metric="m", step=1')
    with pytest.raises(ConfigError, match=r"the sweep lists the same trial twice: lam=0.9 seed=0"):
        make_trials(load_sweep(dup))
    seeded = write_sweep(tmp_path / "seeded.py", 'axes=[Grid({"seed": [1, 2]})], metric="m", step=1')
    with pytest.raises(ConfigError, match=r"'seed' is the sweep's seed path; list seeds in Sweep\(seeds=...\)"):
        make_trials(load_sweep(seeded))
    over = write_sweep(tmp_path / "over.py", 'axes=[Grid({"lam": [0.9, 1.0]})], seeds=[0, 1], metric="m", step=1, '
                                             'budget=Budget(max_trials=3)')
    with pytest.raises(ConfigError, match=r"the sweep has 4 trials, over its budget of 3 \(Budget.max_trials\)"):
        make_trials(load_sweep(over))
