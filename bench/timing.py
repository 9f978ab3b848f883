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


def wait_until_quiet(limit_s: float = 60.0) -> float:
    """Wait for the run's processes to finish exiting (Ray's teardown outlives ``ray.shutdown``), so that the
    baselines do not share the cores with them; returns the machine's CPU use when it went quiet."""
    import psutil

    deadline = time.monotonic() + limit_s
    while True:
        busy = psutil.cpu_percent(interval=1.0)
        if busy < 15 or time.monotonic() > deadline:
            return busy
