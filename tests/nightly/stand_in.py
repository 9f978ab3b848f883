"""A stand-in experiment for the nightly tests: ``launch.py`` runs it like any other, so its run directory is the
real one, and its ``run`` logs PPO-shaped curves of every key metric, through the library's writer, in a moment.

The curves (:func:`curves`) learn towards ``fake.quality``, with ``train/token_mult_prob_error`` at
``fake.mult_error`` and the validation accuracy every 5 steps. Other knobs: ``fake.stop_at=K`` logs the steps up
to K, then fails (a node died); ``fake.fail_seed=S`` fails at once, before any metric, when ``seed=S``;
``fake.sleep=S`` sleeps first; ``fake.slurm_hang=True`` is read by ``fake_launch.py`` only. ``launch.py`` refuses
``policy.optimizer.lr`` <= 0 with one line, as it refuses any invalid config.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from pathlib import Path

import fiddle as fdl

from ppo.config.errors import ConfigError
from ppo.config.tags import Seed
from ppo.launch import LocalExecutor
from ppo.metrics import MetricsWriter
from ppo.nightly.history import KEY_METRICS

STEP = 20
CHECKS = [
    f'data["validation/accuracy"]["{STEP}"] >= 0.6',
    'mean(data["train/critic/explained_var"], -5) > 0',
    'max(data["train/token_mult_prob_error"]) < 1.05',
    '0 <= min(data["train/critic/loss"]) and max(data["train/critic/loss"]) < 6',
]
NIGHTLY = {"step": STEP, "checks": CHECKS}
VALIDATION = "validation/accuracy"


@dataclasses.dataclass
class Trainer:
    max_steps: int = STEP


@dataclasses.dataclass
class Optimizer:
    lr: float = 2e-5


@dataclasses.dataclass
class Policy:
    optimizer: Optimizer


@dataclasses.dataclass
class Fake:
    quality: float = 0.8
    mult_error: float = 1.002
    stop_at: int | None = None
    fail_seed: int | None = None
    sleep: float = 0.0
    slurm_hang: bool = False


@dataclasses.dataclass
class StandIn:
    name: str
    trainer: Trainer
    policy: Policy
    fake: Fake
    executor: object = None
    seed: int = 0
    advantage: str = "gae"

    def check(self) -> None:
        if self.policy.optimizer.lr <= 0:
            raise ConfigError(f"policy.optimizer.lr must be > 0, got {self.policy.optimizer.lr}")
        if self.trainer.max_steps < 1:
            raise ConfigError(f"trainer.max_steps must be >= 1, got {self.trainer.max_steps}")

    def resource_plan(self) -> list[dict]:
        return [{"group": "policy", "gpus": 0}]

    def run(self, run_dir: Path) -> None:
        time.sleep(self.fake.sleep)
        if self.fake.fail_seed == self.seed:
            raise RuntimeError(f"seed {self.seed} hit a broken node")
        steps = self.trainer.max_steps
        last = steps if self.fake.stop_at is None else min(self.fake.stop_at, steps)
        data = curves(steps, seed=self.seed, quality=self.fake.quality, mult_error=self.fake.mult_error)
        log_curves(run_dir, data, last)
        if last < steps:
            raise RuntimeError(f"worker on node 0 died at step {last + 1}")


def curves(steps: int = STEP, *, seed: int = 0, quality: float = 0.8, mult_error: float = 1.002) -> dict:
    """Reference-layout key metrics shaped like a PPO run that learns (validation every 5 steps)."""
    rng = random.Random(seed)
    out: dict[str, dict[str, float]] = {m: {} for m in KEY_METRICS}
    for step in range(0, steps + 1):
        progress = 1.0 - math.exp(-step / (steps / 4))
        if step > 0:
            out["train/reward"][str(step)] = quality * progress + rng.gauss(0, 0.02)
            out["train/critic/loss"][str(step)] = 2.0 * (1 - progress) + 0.3 + rng.gauss(0, 0.05)
            out["train/critic/explained_var"][str(step)] = -0.5 + 1.3 * progress + rng.gauss(0, 0.03)
            out["train/kl_penalty"][str(step)] = 0.001 * step + abs(rng.gauss(0, 0.0005))
            out["train/token_mult_prob_error"][str(step)] = mult_error + abs(rng.gauss(0, 0.001))
        if step % 5 == 0:
            out[VALIDATION][str(step)] = 0.05 + (quality - 0.05) * progress + rng.gauss(0, 0.01)
    return out


def log_curves(run_dir: Path, data: dict, last: int) -> None:
    """Steps 0..``last`` of ``data`` as the trainer logs them: a training record per step, validation apart."""
    with MetricsWriter(run_dir) as writer:
        for step in range(0, last + 1):
            train = {m: s[str(step)] for m, s in data.items() if m != VALIDATION and str(step) in s}
            if train:
                writer.log(step, {**train, "train/lr": 2e-5, "timing/train/total": 1.5})
            if str(step) in data[VALIDATION]:
                writer.log(step, {VALIDATION: data[VALIDATION][str(step)]})


def config() -> fdl.Config:
    return fdl.Config(
        StandIn,
        name="stand_in",
        trainer=fdl.Config(Trainer),
        policy=fdl.Config(Policy, optimizer=fdl.Config(Optimizer)),
        fake=fdl.Config(Fake),
        executor=fdl.Config(LocalExecutor),
        seed=Seed.new(0),
    )


def raw_reward(cfg: fdl.Config) -> None:
    """Fiddler: the raw-reward estimator instead of GAE, as the real recipes name it."""
    cfg.advantage = "raw_reward"
