"""The series helpers, against hand-worked selections and the reference's step-number semantics."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from ppo.metrics.series import (
    SeriesError,
    ordered_values,
    ratio_above,
    select_range,
    series_max,
    series_mean,
    series_median,
    series_min,
)

TEN = [float(v) for v in range(1, 11)]


@pytest.mark.parametrize(
    ("range_start", "range_end", "expected"),
    [
        (1, 0, TEN),
        (0, 0, TEN),
        (1, 5, [1.0, 2.0, 3.0, 4.0]),
        (3, 4, [3.0]),
        (-3, 0, [8.0, 9.0, 10.0]),
        (-1, 0, [10.0]),
        (1, -1, TEN[:-1]),
        (2, -2, [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        (-4, -2, [7.0, 8.0]),
        (-100, 3, [1.0, 2.0]),
        (5, 100, [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]),
        (11, 0, []),
        (5, 5, []),
        (6, 3, []),
    ],
)
def test_select_range(range_start, range_end, expected):
    assert select_range(TEN, range_start, range_end) == expected


def _reference_mean(value: dict[str, float], range_start: int = 1, range_end: int = 0) -> float:
    """The reference's step-number selection (with its resume offset), written out independently."""
    max_step = max(int(s) for s in value)
    offset = max_step - len(value)
    n = len(value)
    if range_start < 0:
        range_start += n + 1 + offset
    if range_end <= 0:
        range_end += n + 1 + offset
    return statistics.mean(float(v) for s, v in value.items() if range_start <= int(s) < range_end)


@pytest.mark.parametrize(("range_start", "range_end"), [(1, 0), (1, 5), (-3, 0), (2, -1), (-5, -2), (4, 9)])
def test_mean_agrees_with_the_reference_when_steps_start_at_one(range_start, range_end):
    series = {str(s): math.sin(s) + 0.1 * s for s in range(1, 21)}
    assert series_mean(series, range_start, range_end) == pytest.approx(_reference_mean(series, range_start, range_end))


@pytest.mark.parametrize("steps", [2, 10, 12, 27, 1000])
def test_the_mean_of_a_constant_series_is_that_constant(steps):
    """NeMo-RL's ``mean(data["train/grad_norm"], 2, 0) > 0.06`` is false on a series that is 0.06 at every step;
    ``fsum(values) / n`` gives 0.060000000000000005 for 9, 11, 26, ... values, and the check would pass."""
    series = {str(s): 0.06 for s in range(1, steps + 1)}
    assert series_mean(series) == 0.06
    assert series_mean(series, 2, 0) == 0.06


def test_the_mean_is_exact_rounded_once_as_the_reference_computes_it():
    rng = random.Random(0)
    for _ in range(300):
        series = {str(s): rng.uniform(-1.0, 1.0) * 10.0 ** rng.randint(-8, 8) for s in range(1, rng.randint(7, 60))}
        for range_start, range_end in ((1, 0), (2, 0), (-5, -1)):
            assert series_mean(series, range_start, range_end) == _reference_mean(series, range_start, range_end)


def test_ranges_count_entries_when_a_resumed_log_starts_late():
    series = {str(s): float(s) for s in range(201, 211)}
    assert series_mean(series, 1, 3) == 201.5
    assert series_mean(series, -2) == 209.5
    assert series_median(series, 1, 4) == 202.0


def test_ranges_count_entries_for_sparse_steps_and_ignore_dict_order():
    series = {"30": 0.3, "10": 0.1, "20": 0.2, "40": 0.4}
    assert ordered_values(series) == [0.1, 0.2, 0.3, 0.4]
    assert series_mean(series, -2) == pytest.approx(0.35)
    assert series_median(series, 1, 4) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("ignore_top_p", "expected"),
    [(0.0, 14.5), (0.1, 5.0), (0.5, 3.0), (0.99, 1.0), (1.0, 1.0)],
)
def test_mean_ignore_top_p_drops_the_largest(ignore_top_p, expected):
    series = {str(s): float(s) for s in range(1, 10)} | {"10": 100.0}
    assert series_mean(series, ignore_top_p=ignore_top_p) == pytest.approx(expected)


def test_min_max_median_ratio_above():
    series = {"1": 0.5, "2": -1.0, "3": 2.0, "4": 1.0}
    assert series_min(series) == -1.0
    assert series_max(series) == 2.0
    assert series_median(series) == 0.75
    assert ratio_above(series, 1.0) == 0.5
    assert ratio_above(series, 2.5) == 0.0
    assert ratio_above({}, 1.0) == 0.0


def test_nan_propagates_and_is_not_above_anything():
    series = {"1": 1.0, "2": math.nan, "3": 3.0}
    for reduce in (series_min, series_max, series_mean, series_median):
        assert math.isnan(reduce(series))
    assert math.isnan(series_mean(series, ignore_top_p=0.5))
    assert series_mean(series, 3) == 3.0
    assert ratio_above(series, 0.0) == pytest.approx(2 / 3)


def test_infinities_are_averaged_not_rejected():
    assert series_mean({"1": math.inf, "2": 1.0}) == math.inf
    assert math.isnan(series_mean({"1": math.inf, "2": -math.inf}))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: series_mean({"1": 1.0}, 2), "selects no entries"),
        (lambda: series_median({"1": 1.0}, 1, 1), "selects no entries"),
        (lambda: series_mean({"1": 1.0}, 1.5), "range_start must be an integer"),
        (lambda: series_mean({"1": 1.0}, ignore_top_p=1.5), "ignore_top_p"),
        (lambda: series_min({}), "empty series"),
        (lambda: series_max({"x": 1.0}), "step keys must be integers"),
    ],
)
def test_errors(call, match):
    with pytest.raises(SeriesError, match=match):
        call()
