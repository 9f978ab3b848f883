"""Reductions over one metric's history, ``{"<step>": value}``: the helpers nightly checks call.

Semantics follow the reference's ``check_metrics.py`` with two deliberate differences, both written down here:

**Ranges count entries, not step numbers.** ``range_start``/``range_end`` are 1-indexed positions in the series
sorted by step; the end is exclusive; ``range_end=0`` means "through the last entry, inclusive"; a negative value
counts from the end (``range_start=-5`` is the last five entries, ``range_end=-1`` stops before the last entry);
``range_start=0`` is the same as 1. Positions are clamped to the series like Python slices. Counting entries is
what makes a range mean the same thing when the steps do not start at 1 (a run resumed into a fresh log whose
first step is 201: ``mean(d, 1, 11)`` is its first ten entries) or are sparse (validation every 10 steps:
``mean(d, -3)`` is the last three evaluations). The reference counts step numbers for positive positions; for a
metric logged at every step from step 1, which is what its nightly checks use, the two agree.

**NaN propagates.** If a selected value is NaN, ``min``/``max``/``mean``/``median`` return NaN (a NaN is a broken
run, not an outlier for ``ignore_top_p`` to drop), so any comparison with the result fails. ``ratio_above`` counts
NaN as not above.

``ratio_above(d, t)`` is the fraction of values ``>= t``, as in the reference (despite the name).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from fractions import Fraction


class SeriesError(ValueError):
    """A reduction that has no answer: an empty selection, a bad argument."""


def ordered_values(series: Mapping[str, float]) -> list[float]:
    """The values sorted by step number, whatever the dict's own order."""
    try:
        items = sorted(series.items(), key=lambda kv: int(kv[0]))
    except ValueError as exc:
        raise SeriesError(f"step keys must be integers ({exc})") from None
    return [float(v) for _, v in items]


def select_range(values: list[float], range_start: int = 1, range_end: int = 0) -> list[float]:
    """The entries ``range_start`` (1-indexed) up to ``range_end`` (exclusive; 0 = through the last; negative = from
    the end), clamped like a Python slice."""
    for name, value in (("range_start", range_start), ("range_end", range_end)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SeriesError(f"{name} must be an integer, got {value!r}")
    n = len(values)
    lo = range_start - 1 if range_start > 0 else (0 if range_start == 0 else n + range_start)
    hi = range_end - 1 if range_end > 0 else n + range_end
    return values[max(lo, 0) : max(hi, 0)]


def series_min(series: Mapping[str, float]) -> float:
    return _reduce(ordered_values(series), min)


def series_max(series: Mapping[str, float]) -> float:
    return _reduce(ordered_values(series), max)


def series_mean(
    series: Mapping[str, float], range_start: int = 1, range_end: int = 0, ignore_top_p: float = 0.0
) -> float:
    """Mean of the selected entries; ``ignore_top_p`` drops that fraction of the largest first.

    The mean is exact, rounded once, as the reference's ``statistics.mean`` computes it: the values are summed as
    fractions, so a series that is 0.06 at every step has a mean of exactly 0.06 (``fsum(values) / n`` rounds twice
    and gives 0.060000000000000005 for nine of them, which turns ``mean(d) > 0.06`` true).

    As in the reference, ``int(n * (1 - p))`` values are kept, but never fewer than one (``p = 1`` keeps the
    smallest), so a spike filter cannot turn a short run into an error.
    """
    if isinstance(ignore_top_p, bool) or not isinstance(ignore_top_p, (int, float)) or not 0.0 <= ignore_top_p <= 1.0:
        raise SeriesError(f"ignore_top_p must be a number between 0 and 1, got {ignore_top_p!r}")
    values = _selected(series, range_start, range_end)
    if any(math.isnan(v) for v in values):
        return math.nan
    if ignore_top_p > 0.0:
        values = sorted(values)[: max(int(len(values) * (1.0 - ignore_top_p)), 1)]
    if all(math.isfinite(v) for v in values):
        return float(sum(map(Fraction, values), Fraction(0)) / len(values))
    return sum(values) / len(values)


def series_median(series: Mapping[str, float], range_start: int = 1, range_end: int = 0) -> float:
    values = _selected(series, range_start, range_end)
    if any(math.isnan(v) for v in values):
        return math.nan
    return float(statistics.median(values))


def ratio_above(series: Mapping[str, float], threshold: float) -> float:
    """Fraction of all values ``>= threshold``; 0.0 for an empty series, as in the reference."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise SeriesError(f"threshold must be a number, got {threshold!r}")
    values = ordered_values(series)
    if not values:
        return 0.0
    return sum(1 for v in values if v >= threshold) / len(values)


def _selected(series: Mapping[str, float], range_start: int, range_end: int) -> list[float]:
    values = ordered_values(series)
    selected = select_range(values, range_start, range_end)
    if not selected:
        raise SeriesError(
            f"range_start={range_start}, range_end={range_end} selects no entries of a series of {len(values)}"
        )
    return selected


def _reduce(values: list[float], fn: Callable[[list[float]], float]) -> float:
    if not values:
        raise SeriesError("empty series")
    if any(math.isnan(v) for v in values):
        return math.nan
    return float(fn(values))
