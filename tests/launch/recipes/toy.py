"""A toy experiment for the launcher's tests: the experiment protocol with no torch anywhere.

``run`` writes ``metrics.jsonl`` and, depending on ``mode``: ``metrics`` (just that), ``fail`` (raises after two
steps), ``ray`` (joins the job's Ray cluster and logs how many nodes are alive), ``preempt`` (the first attempt
waits to be preempted; a requeued attempt finds its marker and finishes).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import fiddle as fdl

from ppo.config.errors import ConfigError
from ppo.config.tags import MaxSequenceLength, Seed
from ppo.launch import LocalExecutor, SlurmExecutor
from ppo.metrics import MetricsWriter

NIGHTLY = {"step": 2, "checks": ['data["train/reward"]["2"] > 0.5']}


@dataclasses.dataclass
class Optimizer:
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    clip_grad: float | None = None


@dataclasses.dataclass
class Data:
    path: str = "data/train.jsonl"
    seed: int = 0
    max_length: int = 128

    def __post_init__(self):
        if self.max_length <= 0:
            raise ValueError(f"max_length must be > 0, got {self.max_length}")


@dataclasses.dataclass
class Parallel:
    tensor: int = 1
    pipeline: int = 1
    context: int = 1


@dataclasses.dataclass
class ToyExperiment:
    name: str
    optimizer: Optimizer
    data: Data
    parallel: Parallel
    executor: object = None
    seed: int = 0
    steps: int = 3
    mode: str = "metrics"
    max_length: int = 128
    checks: list = dataclasses.field(default_factory=list)
    gpus: int = 0
    expect_nodes: int = 1

    def check(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps} (set steps=...)")
        if self.optimizer.lr <= 0:
            raise ConfigError(f"optimizer.lr must be > 0, got {self.optimizer.lr}")
        if self.mode not in ("metrics", "fail", "ray", "preempt"):
            raise ConfigError(f"mode must be metrics, fail, ray or preempt, got {self.mode!r}")
        if self.gpus and self.gpus % (self.parallel.tensor * self.parallel.context):
            raise ConfigError(f"parallel.tensor*context={self.parallel.tensor * self.parallel.context} does not "
                              f"divide gpus={self.gpus}")

    def resource_plan(self) -> list[dict]:
        return [{"group": "policy", "gpus": self.gpus, "tensor": self.parallel.tensor,
                 "pipeline": self.parallel.pipeline, "context": self.parallel.context},
                {"group": "generation", "gpus": self.gpus, "tensor": self.parallel.tensor}]

    def run(self, run_dir: Path) -> None:
        with MetricsWriter(run_dir) as metrics:
            extra = {}
            if self.mode == "ray":
                extra["ray/alive_nodes"] = _alive_ray_nodes(self.expect_nodes)
            if self.mode == "preempt":
                extra["attempt"] = _preemptible(Path(run_dir))
            for step in range(self.steps):
                if self.mode == "fail" and step == 2:
                    raise RuntimeError(f"toy failure at step {step}")
                metrics.log(step, {"train/reward": 0.25 * (step + 1), "train/lr": self.optimizer.lr,
                                   "seed": self.data.seed, **extra})


def _alive_ray_nodes(expect: int) -> int:
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, configure_logging=False)
    try:
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) != expect:
            raise RuntimeError(f"expected {expect} alive Ray nodes, found {len(alive)}")

        @ray.remote(num_cpus=0)
        def where() -> str:
            return ray.get_runtime_context().get_node_id()

        ray.get([where.remote() for _ in range(2)])
        return len(alive)
    finally:
        ray.shutdown()


def _preemptible(run_dir: Path) -> int:
    marker = run_dir / "preempt-marker"
    if marker.exists():
        return 2
    marker.write_text(str(os.getpid()))
    time.sleep(600)
    return 1


def config() -> fdl.Config:
    cfg = fdl.Config(
        ToyExperiment,
        name="toy",
        seed=Seed.new(0),
        optimizer=fdl.Config(Optimizer, lr=2e-5, betas=(0.9, 0.95)),
        data=fdl.Config(Data, path="data/train.jsonl", seed=0),
        parallel=fdl.Config(Parallel),
        executor=fdl.Config(LocalExecutor),
        max_length=MaxSequenceLength.new(128),
        checks=["a > 1", "b < 2"],
    )
    fdl.add_tag(cfg.data, "seed", Seed)
    fdl.add_tag(cfg.data, "max_length", MaxSequenceLength)
    return cfg


def big_lr(cfg: fdl.Config) -> None:
    """Fiddler: a ten times larger learning rate."""
    cfg.optimizer.lr = cfg.optimizer.lr * 10


def on_slurm(cfg: fdl.Config) -> None:
    """Fiddler: 8 nodes × 8 GPUs on SLURM."""
    cfg.executor = fdl.Config(SlurmExecutor, nodes=8, gpus_per_node=8, partition="gpu", account="rl",
                              time_minutes=600, qos="high", cpus_per_task=96, mem_gb=1800,
                              setup_lines=("source /opt/venv/bin/activate",),
                              additional_parameters={"exclusive": True})
    cfg.gpus = 64
    cfg.parallel.tensor = 4
    cfg.parallel.context = 2
