"""How a swept path's values sit on an axis, shared by the figures and the importance analysis: numbers as they are
(on a log scale when positive and spanning two decades or more), anything else (text, booleans, None, numbers mixed
with them) as evenly spaced categories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def ordered(values: Sequence) -> list:
    """The distinct values: numbers ascending, then everything else by repr."""
    return sorted(set(values), key=lambda v: (0, v, "") if is_number(v) else (1, 0, repr(v)))


def tick(value) -> str:
    if isinstance(value, str):
        return value
    return f"{value:.3g}" if is_number(value) else repr(value)


@dataclass(frozen=True)
class Scale:
    """How a swept path's values sit on an axis: numbers as they are (``log`` when positive and spanning two decades
    or more), anything else as the positions 0, 1, ... of ``categories``."""

    log: bool
    categories: list

    def position(self, value) -> float:
        return float(self.categories.index(value)) if self.categories else float(value)


def scale_of(values: Sequence) -> Scale:
    if values and all(is_number(v) for v in values):
        floats = [float(v) for v in values]
        return Scale(log=min(floats) > 0 and max(floats) / min(floats) >= 100, categories=[])
    return Scale(log=False, categories=ordered(values))
