"""What the bench scripts share for timing a call."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn``, after one untimed call (compilation, caches, first-touch
    allocations)."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
