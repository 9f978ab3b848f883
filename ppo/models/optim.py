"""Optimizer settings and the learning-rate schedule: plain Python, no torch.

``OptimizerSettings`` is an experiment component (``policy.optimizer``), so it lives apart from
:mod:`ppo.models.training` (the Megatron optimizer step, which imports torch); both names are importable from there too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SCHEDULES = ("constant", "cosine", "linear")


@dataclass
class OptimizerSettings:
    lr: float = 1e-6
    min_lr: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    clip_grad: float = 1.0
    warmup_steps: int = 0
    schedule: str = "constant"
    decay_steps: int = 1000
    distributed_optimizer: bool | None = None  # default: on with CUDA (sharded optimizer state), off on CPU

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.lr <= 0 or self.min_lr < 0 or self.min_lr > self.lr:
            raise ValueError(f"need 0 <= min_lr <= lr and lr > 0, got lr={self.lr}, min_lr={self.min_lr}")


def learning_rate(settings: OptimizerSettings, step: int) -> float:
    """Linear warmup to ``lr`` over ``warmup_steps``, then constant, cosine or linear decay to ``min_lr``."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    if settings.schedule == "constant":
        return settings.lr
    progress = min(1.0, (step - settings.warmup_steps) / max(1, settings.decay_steps - settings.warmup_steps))
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if settings.schedule == "cosine" else 1 - progress
    return settings.min_lr + (settings.lr - settings.min_lr) * shape
