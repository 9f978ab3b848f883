"""Small plain classes and graphs for the config-layer tests (module level, so Fiddle JSON can import them)."""

from __future__ import annotations

import dataclasses

import fiddle as fdl

from ppo.config.tags import DType, Seed


@dataclasses.dataclass
class Optimizer:
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    weight_decay: float = 0.0
    clip_grad: float | None = None
    nesterov: bool = False


@dataclasses.dataclass
class Model:
    hidden: int = 64
    dtype: str = "float32"
    seed: int = 0


@dataclasses.dataclass
class Loader:
    path: str = "train.jsonl"
    seed: int = 0
    batch_size: int = 8
    options: dict | None = None


@dataclasses.dataclass
class Run:
    name: str
    model: Model
    optimizer: Optimizer
    loader: Loader
    seed: int = 0
    checks: list = dataclasses.field(default_factory=list)
    stages: tuple = ()
    extra: dict = dataclasses.field(default_factory=dict)
    factory_made: Optimizer = dataclasses.field(default_factory=Optimizer)


@dataclasses.dataclass
class OtherOptimizer:
    lr: float = 0.1
    momentum: float = 0.9


def kwargs_fn(a: int = 1, **kwargs):
    return dict(a=a, **kwargs)


def graph() -> fdl.Config:
    """A graph with a tagged value (seed), tagged fields (model.seed, loader.seed, model.dtype), lists, a dict."""
    cfg = fdl.Config(
        Run,
        name="run",
        seed=Seed.new(0),
        model=fdl.Config(Model, hidden=64, dtype=DType.new("float32")),
        optimizer=fdl.Config(Optimizer, lr=2e-5, betas=(0.9, 0.95)),
        loader=fdl.Config(Loader, path="train.jsonl", options={"shuffle": True, "workers": 2}),
        checks=["a > 1", "b < 2"],
        stages=(fdl.Config(Optimizer, lr=1.0), fdl.Config(Optimizer, lr=2.0)),
        extra={"note": "x"},
    )
    fdl.add_tag(cfg.model, "seed", Seed)
    fdl.add_tag(cfg.loader, "seed", Seed)
    return cfg
