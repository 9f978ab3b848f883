"""Axis expansion: grid, tied, explicit points, seeded random sampling, and their product."""

import math

import pytest

from ppo.config.errors import ConfigError
from ppo.sweep.axes import Choice, Grid, LogUniform, Points, Random, Tied, Uniform, expand, significant


def test_grid_is_the_cartesian_product_in_the_order_given():
    assert Grid({"a": [1, 2], "b": ["x", "y", "z"]}).points() == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
        {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"}]


def test_tied_values_move_together():
    tied = Tied({"policy.loss.clip_low": [0.2, 0.2], "policy.loss.clip_high": [0.2, 0.28]})
    assert tied.points() == [{"policy.loss.clip_low": 0.2, "policy.loss.clip_high": 0.2},
                             {"policy.loss.clip_low": 0.2, "policy.loss.clip_high": 0.28}]
    with pytest.raises(ConfigError, match=r"Tied: every path needs the same number of values \(a: 2, b: 1\)"):
        Tied({"a": [1, 2], "b": [1]}).points()


def test_points_are_taken_as_given_and_may_name_different_paths():
    assert Points([{"a": 1}, {"a": 2, "b": None}]).points() == [{"a": 1}, {"a": 2, "b": None}]
    with pytest.raises(ConfigError, match=r"Points\[1\] must be a dict"):
        Points([{"a": 1}, 3]).points()


def test_random_is_reproducible_from_its_seed_and_stays_in_range():
    axis = Random({"lr": LogUniform(1e-7, 1e-5), "lam": Uniform(0.9, 1.0), "kind": Choice(["k1", "k3"])}, n=50,
                  seed=7)
    points = axis.points()
    assert points == axis.points() == Random(axis.distributions, n=50, seed=7).points()
    assert points != Random(axis.distributions, n=50, seed=8).points()
    assert all(1e-7 <= p["lr"] <= 1e-5 and 0.9 <= p["lam"] <= 1.0 and p["kind"] in ("k1", "k3") for p in points)
    assert {p["kind"] for p in points} == {"k1", "k3"}
    # log-uniform: about as many draws in each decade
    low = sum(p["lr"] < 1e-6 for p in points)
    assert 15 <= low <= 35
    # four significant digits, so the overrides read well
    assert all(p["lr"] == significant(p["lr"], 4) and len(repr(p["lam"])) <= 6 for p in points)


def test_random_values_are_the_same_on_every_machine():
    # random.Random(seed) is specified to be reproducible across platforms and Python versions
    assert Random({"x": Uniform(0.0, 1.0)}, n=3, seed=0).points() == [{"x": 0.8444}, {"x": 0.7580}, {"x": 0.4206}]


def test_significant_digits():
    assert significant(0.0123456, 4) == 0.01235
    assert significant(123456.0, 2) == 120000.0
    assert significant(0.0, 3) == 0.0 and math.isnan(significant(math.nan, 3))


def test_expand_crosses_axes_and_refuses_a_path_in_two_axes():
    points = expand([Grid({"a": [1, 2]}), Tied({"b": [3, 4], "c": [5, 6]})])
    assert points == [{"a": 1, "b": 3, "c": 5}, {"a": 1, "b": 4, "c": 6},
                      {"a": 2, "b": 3, "c": 5}, {"a": 2, "b": 4, "c": 6}]
    assert expand([]) == [{}]
    with pytest.raises(ConfigError, match=r"'a' is set by axes\[0\] and axes\[1\]"):
        expand([Grid({"a": [1]}), Points([{"a": 2}])])


@pytest.mark.parametrize("axis, message", [
    (Grid({}), "Grid needs a dict"),
    (Grid({"a": []}), "'a' needs a non-empty list of values"),
    (Grid({"a": "abc"}), "'a' needs a non-empty list of values"),
    (Grid({"a b": [1]}), "is not a dotted config path"),
    (Grid({"a..b": [1]}), "is not a dotted config path"),
    (Grid({"a": [object()]}), "is not a Python literal"),
    (Random({"a": Uniform(1, 1)}, n=2), "needs low < high"),
    (Random({"a": LogUniform(0, 1)}, n=2), "needs 0 < low < high"),
    (Random({"a": Uniform(0, 1)}, n=0), "n must be a positive int"),
    (Random({"a": (0, 1)}, n=2), "needs Uniform"),
])
def test_bad_axes_are_one_line_errors(axis, message):
    with pytest.raises(ConfigError, match=message) as err:
        expand([axis])
    assert "\n" not in str(err.value)
