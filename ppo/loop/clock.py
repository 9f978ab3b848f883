"""Where a step's time goes: each phase's seconds (``timing/train/<phase>``, docs/ppo.md, section "Metrics"), when
it ran (``timing/train/<phase>_start`` and ``_end``, seconds since the run's set-up began: whether two phases
overlapped, e.g. off-policy generation and training), and the phase the loop is in now, which a worker timeout's
message names."""

from __future__ import annotations

import time
from contextlib import contextmanager


class StepClock:
    """The step's ``timings`` (the loop starts a fresh dict each step) and its current ``phase``."""

    phase: str = "setup"
    """The part of the step the loop is in (``values``, ``generation``, ...), named in a worker timeout's message."""

    def __init__(self, origin: float | None = None):
        self.timings: dict[str, float] = {}
        self.origin = time.perf_counter() if origin is None else origin
        """The ``time.perf_counter()`` the ``_start``/``_end`` times count from (the trainer's: its set-up's start)."""

    @contextmanager
    def timed(self, phase: str):
        """Enter ``phase`` and time it (not recorded when it raises)."""
        started = time.perf_counter()
        self.phase = phase
        yield
        self.record(phase, started)

    def record(self, phase: str, started: float) -> None:
        """``phase`` took from ``started`` (a ``time.perf_counter()``) until now: its seconds, and its start and end
        counted from :attr:`origin`."""
        ended = time.perf_counter()
        self.timings[f"timing/train/{phase}"] = ended - started
        self.timings[f"timing/train/{phase}_start"] = started - self.origin
        self.timings[f"timing/train/{phase}_end"] = ended - self.origin

    @contextmanager
    def timed_part(self, part: str):
        """Time spent inside a phase on ``part`` (summed over the step), e.g. scoring within generation."""
        started = time.perf_counter()
        yield
        key = f"timing/train/{part}"
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - started
