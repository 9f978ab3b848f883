"""Where a step's time goes: each phase's seconds (``timing/train/<phase>``, docs/ppo.md, section "Metrics"), and the
phase the loop is in now, which a worker timeout's message names."""

from __future__ import annotations

import time
from contextlib import contextmanager


class StepClock:
    """The step's ``timings`` (the loop starts a fresh dict each step) and its current ``phase``."""

    phase: str = "setup"
    """The part of the step the loop is in (``values``, ``generation``, ...), named in a worker timeout's message."""

    def __init__(self):
        self.timings: dict[str, float] = {}

    @contextmanager
    def timed(self, phase: str):
        """Enter ``phase`` and time it (not recorded when it raises)."""
        started = time.perf_counter()
        self.phase = phase
        yield
        self.record(phase, started)

    def record(self, phase: str, started: float) -> None:
        """``phase`` took from ``started`` (a ``time.perf_counter()``) until now."""
        self.timings[f"timing/train/{phase}"] = time.perf_counter() - started

    @contextmanager
    def timed_part(self, part: str):
        """Time spent inside a phase on ``part`` (summed over the step), e.g. scoring within generation."""
        started = time.perf_counter()
        yield
        key = f"timing/train/{part}"
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - started
