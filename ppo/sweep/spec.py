"""The sweep file: ``SWEEP = Sweep(...)`` in a Python file, loaded and checked.

    from ppo.sweep import Grid, MedianStopping, EarlyStopping, Sweep

    SWEEP = Sweep(
        base="experiments/qwen2p5_1p5b_gsm8k.py",       # the experiment every trial starts from
        axes=[Grid({"advantage.lam_value": [0.95, 1.0], "advantage.lam_policy": [0.9, 0.95, 0.99]})],
        seeds=[0, 1],                                  # every point runs once per seed (``seed_path=seed``)
        metric="validation/accuracy", mode="max", step=200,
        stopping=EarlyStopping(gates=['data["train/reward"]["20"] > 0.1'], rule=MedianStopping(rungs=[50, 100])),
        budget=Budget(max_trials=12, max_gpu_hours=800),
    )

Fields: ``base`` (relative paths are looked up beside the sweep file's directory first, i.e. the repository root for
``sweeps/*.py``, then in the sweep file's directory), ``axes`` (:mod:`ppo.sweep.axes`), ``seeds`` and
``seed_path`` (the override each seed is written to; a path to a field tagged ``Seed`` sets every seed of the
graph), ``overrides`` and ``fiddlers`` applied to every trial before its own overrides, the ``metric`` to rank by,
its direction ``mode`` (``max``/``min``) and the ``step`` to read it at, ``stopping``
(:class:`~ppo.sweep.stopping.EarlyStopping`), ``budget`` (:class:`Budget`), ``max_parallel`` (trials at once;
``--max-parallel`` wins), ``poll_s`` (how often running trials are polled), ``name`` (default: the file's stem),
``step_time_metric`` (for the report) and ``wandb_group_path`` (the config path that gets the sweep id as the wandb
group of every trial, when the base has it; None to leave it alone).

A file with ``SWEEP`` is told from an experiment file without running it
(:func:`ppo.config.loading.is_sweep_file` reads its syntax tree), so ``launch.py`` can hand it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ppo.config.errors import ConfigError
from ppo.config.loading import is_sweep_file, load_module
from ppo.sweep.axes import AXIS_TYPES, Axis, Point, expand
from ppo.sweep.search import Search
from ppo.sweep.stopping import EarlyStopping


@dataclass(frozen=True)
class Budget:
    """Limits checked before anything launches: the number of trials, and an upper bound of the GPU hours (SLURM
    trials: nodes × GPUs per node × time limit; local trials have no time limit and count only as trials)."""

    max_trials: int | None = None
    max_gpu_hours: float | None = None

    def check(self) -> None:
        if self.max_trials is not None and (isinstance(self.max_trials, bool) or not isinstance(self.max_trials, int)
                                            or self.max_trials < 1):
            raise ConfigError(f"Budget.max_trials must be a positive int, got {self.max_trials!r}")
        if self.max_gpu_hours is not None and (not isinstance(self.max_gpu_hours, (int, float))
                                               or self.max_gpu_hours <= 0):
            raise ConfigError(f"Budget.max_gpu_hours must be > 0, got {self.max_gpu_hours!r}")


@dataclass(frozen=True)
class Sweep:
    base: str
    metric: str
    step: int
    mode: str = "max"
    axes: Sequence[Axis] = ()
    seeds: Sequence[int] = (0,)
    seed_path: str = "seed"
    overrides: Sequence[str] = ()
    fiddlers: Sequence[str] = ()
    stopping: EarlyStopping | None = None
    budget: Budget | None = None
    max_parallel: int | None = None
    poll_s: float = 30.0
    name: str | None = None
    step_time_metric: str = "timing/train/total_step_time"
    wandb_group_path: str | None = "trainer.wandb_group"
    search: Search | None = None

    @property
    def maximize(self) -> bool:
        return self.mode == "max"

    def check(self) -> None:
        def must(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(f"Sweep: {message}")

        must(isinstance(self.base, str) and self.base.endswith(".py"),
             f"base must be the path of an experiment file (.py), got {self.base!r}")
        must(isinstance(self.metric, str) and bool(self.metric), f"metric must be a metric name, got {self.metric!r}")
        must(isinstance(self.step, int) and not isinstance(self.step, bool) and self.step >= 0,
             f"step must be an int >= 0 (the step the metric is read at), got {self.step!r}")
        must(self.mode in ("max", "min"), f"mode must be 'max' or 'min', got {self.mode!r}")
        must(isinstance(self.axes, (list, tuple)),
             f"axes must be a list of Grid/Tied/Points/Random, got {self.axes!r}")
        must(all(isinstance(a, AXIS_TYPES) for a in self.axes), "axes must be Grid, Tied, Points or Random")
        must(isinstance(self.seeds, (list, tuple)) and len(self.seeds) > 0
             and all(isinstance(s, int) and not isinstance(s, bool) for s in self.seeds),
             f"seeds must be a non-empty list of ints, got {self.seeds!r}")
        must(len(set(self.seeds)) == len(self.seeds), f"seeds repeat: {list(self.seeds)}")
        must(isinstance(self.seed_path, str) and bool(self.seed_path), "seed_path must be a config path")
        must(isinstance(self.overrides, (list, tuple))
             and all(isinstance(o, str) and "=" in o for o in self.overrides),
             "overrides must be a list of 'path=value' strings")
        must(isinstance(self.fiddlers, (list, tuple)) and all(isinstance(f, str) for f in self.fiddlers),
             "fiddlers must be a list of fiddler names")
        must(self.max_parallel is None or (isinstance(self.max_parallel, int) and self.max_parallel >= 1),
             f"max_parallel must be an int >= 1, got {self.max_parallel!r}")
        must(isinstance(self.poll_s, (int, float)) and self.poll_s > 0, f"poll_s must be > 0, got {self.poll_s!r}")
        must(self.name is None or (isinstance(self.name, str) and bool(self.name.strip())), "name must be a string")
        must(self.wandb_group_path is None or isinstance(self.wandb_group_path, str),
             "wandb_group_path must be a config path or None")
        if self.stopping is not None:
            must(isinstance(self.stopping, EarlyStopping), "stopping must be EarlyStopping(...)")
            self.stopping.check()
        if self.budget is not None:
            must(isinstance(self.budget, Budget), "budget must be Budget(...)")
            self.budget.check()
        if self.search is not None:
            must(isinstance(self.search, Search), "search must be Search(...)")
            must(not self.axes, "a Search chooses every swept path; give the sweep no axes (put fixed values in "
                                "overrides)")
            self.search.check()


@dataclass
class LoadedSweep:
    path: Path
    spec: Sweep

    @property
    def name(self) -> str:
        return self.spec.name or self.path.stem

    @property
    def base_path(self) -> Path:
        return resolve_base(self.path, self.spec.base)

    def points(self) -> list[Point]:
        return expand(self.spec.axes)


def resolve_base(sweep_file: Path, base: str) -> Path:
    given = Path(base)
    if given.is_absolute():
        candidates = [given]
    else:
        here = Path(sweep_file).resolve().parent
        candidates = [here.parent / given, here / given]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"{sweep_file}: base experiment {base} not found (looked for {tried})")


def load_sweep(path: str | Path) -> LoadedSweep:
    """Import the sweep file and check its ``SWEEP`` (one-line :class:`ConfigError` on any problem)."""
    path = Path(path)
    module = load_module(path)
    spec = getattr(module, "SWEEP", None)
    if not isinstance(spec, Sweep):
        raise ConfigError(f"{path}: SWEEP must be ppo.sweep.Sweep(...), got {type(spec).__name__}")
    spec.check()
    loaded = LoadedSweep(path, spec)
    loaded.base_path  # noqa: B018 - fails early when the base is missing
    if is_sweep_file(loaded.base_path):
        raise ConfigError(f"{path}: the base {spec.base} is itself a sweep file; a sweep starts from an experiment")
    return loaded
