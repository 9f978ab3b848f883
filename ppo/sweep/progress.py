"""What a running sweep shows between state changes: each running trial's step, latest metric and ETA, and the best so
far.  On a terminal the block is redrawn in place about once a second; in a log (no terminal) it is written as plain
lines every ``poll_s`` seconds, so a sweep that runs for hours shows it is alive.

The ETA is the steps left to the sweep's step times the trial's mean step time (``step_time_metric``, as logged);
unknown until a step has been timed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from ppo.metrics import last_step


@dataclass(frozen=True)
class Running:
    trial_id: str
    label: str
    data: Mapping[str, Mapping[str, float]]


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def trial_line(trial: Running, metric: str, target: int, step_time_metric: str) -> str:
    reached = last_step(trial.data)
    if reached is None:
        return f"  {trial.trial_id}  starting            {trial.label}"
    series = trial.data.get(metric, {})
    latest = max(series, key=int) if series else None
    shown = f"{metric} {series[latest]:.4g} @ {latest}" if latest is not None else f"{metric} —"
    times = [v for v in trial.data.get(step_time_metric, {}).values() if math.isfinite(v)]
    eta = _duration(max(target - reached, 0) * sum(times) / len(times)) if times else "?"
    return f"  {trial.trial_id}  step {reached}/{target}  {shown}  ETA {eta}  {trial.label}"


def best_line(best: tuple[float, str] | None, metric: str) -> str:
    return f"  best so far: {metric} {best[0]:.4g} ({best[1]})" if best else "  best so far: none yet"


def progress_lines(running: list[Running], best: tuple[float, str] | None, metric: str, target: int,
                   step_time_metric: str) -> list[str]:
    return [f"{len(running)} running:", *(trial_line(t, metric, target, step_time_metric) for t in running),
            best_line(best, metric)]


class Progress:
    """Writes :func:`progress_lines` to ``out``: in place on a terminal, as periodic lines otherwise."""

    def __init__(self, out: TextIO, every_s: float, prefix: str):
        self.out = out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.every_s = 1.0 if self.tty else every_s
        self.prefix = prefix
        self._shown = 0
        self._next = time.monotonic() + self.every_s

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def show(self, lines: list[str]) -> None:
        self._next = time.monotonic() + self.every_s
        if self.tty:
            self.clear()
            self.out.write("".join(f"{line}\x1b[K\n" for line in lines))
            self._shown = len(lines)
        else:
            self.out.write("".join(f"{self.prefix} {line}\n" for line in lines))
        self.out.flush()

    def clear(self) -> None:
        """Remove the block drawn last (a terminal only), so that a state-change line is not mixed into it."""
        if self.tty and self._shown:
            self.out.write(f"\x1b[{self._shown}F\x1b[J")
            self._shown = 0
