"""Sweep axes: the ways a sweep file says which override sets to try.

Each axis expands to a list of points, a point being ``{dotted path: value}``; a sweep's points are the cartesian
product of its axes (a path may appear in one axis only).

- ``Grid({"a": [1, 2], "b": [3, 4]})``: every combination (4 points).
- ``Tied({"policy.loss.clip_low": [0.2, 0.28], "policy.loss.clip_high": [0.2, 0.28]})``: values that move
  together, the i-th value of every path in point i (all lists the same length).
- ``Points([{"a": 1}, {"a": 2, "b": 5}])``: an explicit list of override dicts (they may name different paths).
- ``Random({"policy.optimizer.lr": LogUniform(1e-7, 1e-5), "advantage.lam": Uniform(0.9, 1.0)}, n=8, seed=0)``:
  ``n`` points drawn with :class:`random.Random` seeded by ``seed`` (the same points on every machine and Python),
  floats rounded to ``digits`` significant digits so they read well as overrides; ``Choice([...])`` draws from a
  list.

Values must be Python literals (numbers, strings, booleans, None, tuples, lists, dicts): they are written into
overrides as ``path=repr(value)`` and read back by the launcher's literal parser.
"""

from __future__ import annotations

import ast
import itertools
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppo.config.errors import ConfigError

Point = dict[str, Any]
_PATH = re.compile(r"[^\s.=]+(\.[^\s.=]+)*")


def _check_path(path: Any, where: str) -> str:
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise ConfigError(f"{where}: {path!r} is not a dotted config path (e.g. 'advantage.lam_value')")
    return path


def _check_value(path: str, value: Any, where: str) -> Any:
    try:
        ok = ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        ok = False
    if not ok:
        raise ConfigError(f"{where}: the value {value!r} for '{path}' is not a Python literal (numbers, strings, "
                          f"booleans, None, tuples, lists, dicts)")
    return value


def _values(path: str, values: Any, where: str) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ConfigError(f"{where}: '{path}' needs a non-empty list of values, got {values!r}")
    return [_check_value(path, v, where) for v in values]


@dataclass(frozen=True)
class Grid:
    """Every combination of the listed values (cartesian product, in the order the paths are given)."""

    values: Mapping[str, Sequence[Any]]

    def points(self) -> list[Point]:
        where = "Grid"
        if not isinstance(self.values, Mapping) or not self.values:
            raise ConfigError(f"{where} needs a dict {{path: [values]}}, got {self.values!r}")
        paths = [_check_path(p, where) for p in self.values]
        lists = [_values(p, self.values[p], where) for p in paths]
        return [dict(zip(paths, combo)) for combo in itertools.product(*lists)]


@dataclass(frozen=True)
class Tied:
    """Values that move together: point i sets every path to its i-th value."""

    values: Mapping[str, Sequence[Any]]

    def points(self) -> list[Point]:
        where = "Tied"
        if not isinstance(self.values, Mapping) or not self.values:
            raise ConfigError(f"{where} needs a dict {{path: [values]}}, got {self.values!r}")
        paths = [_check_path(p, where) for p in self.values]
        lists = [_values(p, self.values[p], where) for p in paths]
        lengths = {len(v) for v in lists}
        if len(lengths) != 1:
            sizes = ", ".join(f"{p}: {len(v)}" for p, v in zip(paths, lists))
            raise ConfigError(f"{where}: every path needs the same number of values ({sizes})")
        return [dict(zip(paths, combo)) for combo in zip(*lists)]


@dataclass(frozen=True)
class Points:
    """An explicit list of override dicts."""

    overrides: Sequence[Mapping[str, Any]]

    def points(self) -> list[Point]:
        where = "Points"
        if isinstance(self.overrides, Mapping) or not isinstance(self.overrides, Sequence) or not self.overrides:
            raise ConfigError(f"{where} needs a non-empty list of override dicts, got {self.overrides!r}")
        out = []
        for i, point in enumerate(self.overrides):
            if not isinstance(point, Mapping):
                raise ConfigError(f"{where}[{i}] must be a dict {{path: value}}, got {point!r}")
            out.append({_check_path(p, f"{where}[{i}]"): _check_value(p, v, f"{where}[{i}]") for p, v in point.items()})
        return out


@dataclass(frozen=True)
class Uniform:
    low: float
    high: float

    def check(self, path: str) -> None:
        if not (isinstance(self.low, (int, float)) and isinstance(self.high, (int, float)) and self.low < self.high):
            raise ConfigError(f"Random: Uniform for '{path}' needs low < high, got ({self.low}, {self.high})")

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)


@dataclass(frozen=True)
class LogUniform:
    low: float
    high: float

    def check(self, path: str) -> None:
        if not (isinstance(self.low, (int, float)) and isinstance(self.high, (int, float))
                and 0 < self.low < self.high):
            raise ConfigError(f"Random: LogUniform for '{path}' needs 0 < low < high, got ({self.low}, {self.high})")

    def draw(self, rng: random.Random) -> float:
        return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))


@dataclass(frozen=True)
class Choice:
    options: Sequence[Any]

    def check(self, path: str) -> None:
        _values(path, self.options, "Random: Choice")

    def draw(self, rng: random.Random) -> Any:
        return self.options[rng.randrange(len(self.options))]


def significant(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` significant digits (``0.0123456`` -> ``0.01235`` for 4)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


@dataclass(frozen=True)
class Random:
    """``n`` points drawn from per-path distributions with a seeded :class:`random.Random`."""

    distributions: Mapping[str, Uniform | LogUniform | Choice]
    n: int
    seed: int = 0
    digits: int = 4

    def points(self) -> list[Point]:
        where = "Random"
        if not isinstance(self.distributions, Mapping) or not self.distributions:
            raise ConfigError(f"{where} needs a dict {{path: Uniform(...)|LogUniform(...)|Choice([...])}}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"{where}: n must be a positive int, got {self.n!r}")
        if isinstance(self.digits, bool) or not isinstance(self.digits, int) or not 1 <= self.digits <= 17:
            raise ConfigError(f"{where}: digits must be an int in 1..17, got {self.digits!r}")
        for path, dist in self.distributions.items():
            _check_path(path, where)
            if not isinstance(dist, (Uniform, LogUniform, Choice)):
                raise ConfigError(f"{where}: '{path}' needs Uniform(low, high), LogUniform(low, high) or "
                                  f"Choice([...]), got {dist!r}")
            dist.check(path)
        rng = random.Random(self.seed)
        out = []
        for _ in range(self.n):
            point = {}
            for path, dist in self.distributions.items():
                value = dist.draw(rng)
                point[path] = significant(value, self.digits) if isinstance(value, float) else value
            out.append(point)
        return out


Axis = Grid | Tied | Points | Random
AXIS_TYPES = (Grid, Tied, Points, Random)


def expand(axes: Iterable[Axis]) -> list[Point]:
    """The cartesian product of the axes' points, each point the union of one point of every axis.

    A path set by two axes is refused; a sweep without axes has one empty point (seeds only).
    """
    axes = list(axes)
    owner: dict[str, int] = {}
    expanded = []
    for i, axis in enumerate(axes):
        if not isinstance(axis, AXIS_TYPES):
            raise ConfigError(f"axes[{i}] must be Grid, Tied, Points or Random (ppo.sweep), got {axis!r}")
        points = axis.points()
        for path in dict.fromkeys(p for point in points for p in point):
            if path in owner:
                raise ConfigError(f"'{path}' is set by axes[{owner[path]}] and axes[{i}]; give each path one axis "
                                  f"(use Tied or Points for values that move together)")
            owner[path] = i
        expanded.append(points)
    out = []
    for combo in itertools.product(*expanded):
        merged: Point = {}
        for point in combo:
            merged.update(point)
        out.append(merged)
    return out

