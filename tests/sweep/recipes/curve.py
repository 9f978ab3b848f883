"""A light experiment for the sweep tests: a learning curve from a formula, logged step by step, no torch, no Ray.

The curve rises towards a quality that peaks at ``lr = 1e-3``, ``lam = 0.95`` (plus ``0.01 × seed``), so a sweep has
a known winner.  ``step_s`` sleeps between steps (time for a test to poll or cancel a running trial),
``diverge_at`` logs a NaN loss from that step on, ``fail_at`` raises at that step in the first ``fail_attempts``
attempts, ``child`` starts a ``sleep`` child process (its PID in ``child.pid``) to show that stopping a trial kills
its whole process tree.  A run resumes after the last step in its ``metrics.jsonl`` (its "checkpoint"), and logs
``attempt``: how many times it was started.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import time
from pathlib import Path

import fiddle as fdl

from ppo.config.errors import ConfigError
from ppo.launch import LocalExecutor
from ppo.metrics import MetricsWriter, read_records


def quality(lr: float, lam: float, seed: int) -> float:
    return 1.0 - abs(math.log10(lr) + 3.0) / 3.0 - abs(lam - 0.95) + 0.01 * seed


def reward(lr: float, lam: float, seed: int, step: int) -> float:
    return quality(lr, lam, seed) * (1.0 - math.exp(-step / 4.0))


@dataclasses.dataclass
class Optim:
    lr: float = 1e-3


@dataclasses.dataclass
class CurveExperiment:
    name: str
    optim: Optim
    executor: object = None
    seed: int = 0
    lam: float = 0.95
    clip: float = 0.2
    steps: int = 10
    step_s: float = 0.0
    diverge_at: int | None = None
    fail_at: int | None = None
    fail_attempts: int = 1
    child: bool = False

    def check(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps}")
        if self.optim.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.optim.lr}")
        if not 0.0 <= self.lam <= 1.0:
            raise ConfigError(f"lam must be in [0, 1], got {self.lam}")

    def resource_plan(self) -> list[dict]:
        return [{"group": "curve", "processes": 1}]

    def run(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        log = run_dir / "metrics.jsonl"
        start = max((r["step"] for r in read_records(log)), default=0) + 1 if log.exists() else 1
        marker = run_dir / "attempts.txt"
        attempt = int(marker.read_text()) + 1 if marker.exists() else 1
        marker.write_text(str(attempt))
        sleeper = subprocess.Popen(["sleep", "600"]) if self.child else None
        if sleeper is not None:
            (run_dir / "child.pid").write_text(str(sleeper.pid))
        try:
            self._steps(run_dir, start, attempt)
        finally:
            if sleeper is not None:
                sleeper.kill()
                sleeper.wait()

    def _steps(self, run_dir: Path, start: int, attempt: int) -> None:
        with MetricsWriter(run_dir) as metrics:
            for step in range(start, self.steps + 1):
                began = time.perf_counter()
                if self.fail_at is not None and step >= self.fail_at and attempt <= self.fail_attempts:
                    raise RuntimeError(f"curve failure at step {step}")
                time.sleep(self.step_s)
                loss = math.nan if self.diverge_at is not None and step >= self.diverge_at else 1.0 / step
                record = {"train/reward": reward(self.optim.lr, self.lam, self.seed, step), "train/loss": loss,
                          "train/token_mult_prob_error": 1.0 + self.clip / 100, "attempt": attempt,
                          "timing/train/total_step_time": time.perf_counter() - began}
                if step % 2 == 0:
                    record["validation/accuracy"] = 0.5 * reward(self.optim.lr, self.lam, self.seed, step)
                metrics.log(step, record)


def config() -> fdl.Config:
    return fdl.Config(CurveExperiment, name="curve", optim=fdl.Config(Optim, lr=1e-3),
                      executor=fdl.Config(LocalExecutor), seed=0, lam=0.95, steps=10)
