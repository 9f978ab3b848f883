"""From a sweep file to checked trials, before anything is created or submitted.

1. the sweep file loads and its ``SWEEP`` is well formed (:mod:`ppo.sweep.spec`), the axes expand, ids are unique,
   the trial count fits the budget (:mod:`ppo.sweep.trials`);
2. the base experiment is prepared exactly as ``launch.py`` prepares it (:func:`ppo.launch.prepare.prepare`) with
   ``--executor``, the sweep's fiddlers and common overrides: a broken base fails here, once;
3. every path an axis sets, and the seed path, is located in the base graph (unknown paths get the launcher's
   did-you-mean);
4. every trial is prepared in full the same way (overrides parsed and type-checked, ``fdl.build``, the built
   experiment's ``check()``, the executor's ``check()``); the first failure names its trial;
5. the GPU-hour budget is checked against the SLURM time limits.

Every trial logs to wandb in the sweep's group: ``trainer.wandb_group='<sweep id>'`` (``Sweep.wandb_group_path``) is
set when the base graph has that path; the trainer sends the trial's flattened config and overrides as the wandb
config.  That override does not enter trial ids.

SLURM trials each get their own Ray port (``executor.ray_port`` + the trial's index, and for loopback test
clusters their own addresses), so trials that share a node do not collide; the override shows in their
``config.txt``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ppo.config.errors import ConfigError
from ppo.config.paths import locate
from ppo.config.printing import Change, diff
from ppo.launch.executors import SlurmExecutor
from ppo.launch.prepare import Prepared, Request, prepare
from ppo.launch.rundir import safe_name
from ppo.sweep.search import check_storage
from ppo.sweep.spec import LoadedSweep
from ppo.sweep.trials import Trial, config_id, make_trials, override_text, trial_id

RAY_PORT_SPAN = 1000
"""SLURM trial i uses Ray port ``base + i % RAY_PORT_SPAN``."""


@dataclasses.dataclass
class PlannedTrial:
    trial: Trial
    prepared: Prepared
    changes: list[Change]
    """The trial's flattened difference from the sweep's base (the experiment with the common edits)."""

    @property
    def overrides(self) -> list[str]:
        return list(self.prepared.request.overrides)


@dataclasses.dataclass
class SweepPlan:
    loaded: LoadedSweep
    base: Prepared
    trials: list[PlannedTrial]
    max_parallel: int
    extra_overrides: list[str]
    group: list[str] = dataclasses.field(default_factory=list)
    """The wandb group override every trial gets (empty when the base has no such path)."""

    @property
    def kind(self) -> str:
        return self.base.executor.kind

    @property
    def is_slurm(self) -> bool:
        return isinstance(self.base.executor, SlurmExecutor)


def _prepare(loaded: LoadedSweep, overrides: Sequence[str], executor: str | None, dry_run: bool) -> Prepared:
    return prepare(Request(str(loaded.base_path), list(overrides), list(loaded.spec.fiddlers), executor,
                           dry_run=dry_run))


def _group_override(loaded: LoadedSweep, base: Prepared) -> list[str]:
    """``trainer.wandb_group='<sweep id>'`` (the sweep's ``wandb_group_path``) when the base graph has that path."""
    path = loaded.spec.wandb_group_path
    if not path:
        return []
    try:
        locate(base.cfg, path)
    except ConfigError:
        return []
    return [f"{path}={loaded.name!r}"]


def _slurm_overrides(prepared: Prepared, index: int) -> list[str]:
    executor = prepared.executor
    if not isinstance(executor, SlurmExecutor):
        return []
    out = [f"executor.ray_port={executor.ray_port + index % RAY_PORT_SPAN}"]
    if executor.ray_loopback_base is not None:
        span = 253 - executor.nodes  # the addresses 127.0.0.2 .. 127.0.0.(254 - nodes) a base may start at
        out.append(f"executor.ray_loopback_base={2 + (executor.ray_loopback_base - 2 + index * executor.nodes) % span}")
    return out


def plan_sweep(loaded: LoadedSweep, executor: str | None = None, extra_overrides: Sequence[str] = (),
               max_parallel: int | None = None, dry_run: bool = False, bounds: bool = True) -> SweepPlan:
    """Validate the sweep and every trial (see the module docstring); raises a one-line :class:`ConfigError`.

    ``dry_run`` is handed to :func:`~ppo.launch.prepare.prepare` (a SLURM dry run only reports missing input paths).
    ``bounds=False`` skips preparing a search's bounds (a SLURM array element re-plans a sweep its driver checked).
    """
    spec = loaded.spec
    trials = [] if spec.search is not None else make_trials(loaded, extra_overrides)
    common = [*spec.overrides, *extra_overrides]
    try:
        base = _prepare(loaded, common, executor, dry_run)
        group = _group_override(loaded, base)
        if group:
            base = _prepare(loaded, [*common, *group], executor, dry_run)
    except ConfigError as err:
        raise ConfigError(f"the sweep's base ({spec.base}): {err}") from None
    searched = list(spec.search.space) if spec.search is not None else []
    for path in dict.fromkeys([*(p for t in trials for p in t.point), *searched, spec.seed_path]):
        try:
            locate(base.cfg, path)
        except ConfigError as err:
            raise ConfigError(f"sweep axis: {err}") from None
    planned = []
    for trial in trials:
        overrides = [*trial.overrides, *group,
                     *(o for o in _slurm_overrides(base, trial.index) if o.partition("=")[0] not in trial.point)]
        try:
            prepared = _prepare(loaded, overrides, executor, dry_run)
        except ConfigError as err:
            raise ConfigError(f"trial {trial.id} ({trial.label()}): {err}") from None
        planned.append(PlannedTrial(trial, prepared, diff(base.cfg, prepared.cfg)))
    if spec.search is not None:
        parallel = max_parallel or spec.max_parallel or 1
        plan = SweepPlan(loaded, base, planned, max(1, min(parallel, spec.search.n_trials * len(spec.seeds))),
                         list(extra_overrides), group)
        if bounds:
            _check_search(plan, executor, dry_run)
            _check_gpu_budget(plan)
        return plan
    parallel = max_parallel or spec.max_parallel or (len(planned) if isinstance(base.executor, SlurmExecutor) else 1)
    plan = SweepPlan(loaded, base, planned, max(1, min(parallel, len(planned) or 1)), list(extra_overrides), group)
    _check_gpu_budget(plan)
    return plan


def plan_trial(plan: SweepPlan, point: dict, seed: int, index: int, executor: str | None = None,
               dry_run: bool = False) -> PlannedTrial:
    """One trial of a search, prepared in full like an expanded sweep's (its point chosen by the study; on SLURM,
    its Ray port and addresses from ``index``, as an expanded trial's)."""
    loaded, spec = plan.loaded, plan.loaded.spec
    common = [*spec.overrides, *plan.extra_overrides]
    tid = trial_id(point, seed, common, spec.fiddlers)
    texts = (*common, *(override_text(p, v) for p, v in point.items()), override_text(spec.seed_path, seed))
    trial = Trial(tid, index, dict(point), seed, config_id(point, common, spec.fiddlers), texts)
    slurm = [o for o in _slurm_overrides(plan.base, index) if o.partition("=")[0] not in point]
    prepared = _prepare(loaded, [*trial.overrides, *plan.group, *slurm], executor or plan.kind, dry_run)
    return PlannedTrial(trial, prepared, diff(plan.base.cfg, prepared.cfg))


def _check_search(plan: SweepPlan, executor: str | None, dry_run: bool) -> None:
    """Each end of every searched range (each Choice option) is prepared like a trial: a bound the base refuses
    fails here, named; a database the study names must open.  On SLURM each array element asks the study for one
    configuration and runs it once: one seed per configuration."""
    search = plan.loaded.spec.search
    if plan.is_slurm and len(plan.loaded.spec.seeds) != 1:
        raise ConfigError(f"a Search on SLURM runs one seed per configuration (each array element asks the study for "
                          f"one), got seeds={list(plan.loaded.spec.seeds)}; give one seed, or use --executor local")
    for point in search.bounds():
        try:
            plan_trial(plan, point, plan.loaded.spec.seeds[0], 0, executor, dry_run)
        except ConfigError as err:
            shown = " ".join(override_text(p, v) for p, v in point.items())
            raise ConfigError(f"Search bounds ({shown}): {err}") from None
    check_storage(search)


def trial_gpus(prepared: Prepared) -> int | None:
    executor = prepared.executor
    return executor.nodes * executor.gpus_per_node if isinstance(executor, SlurmExecutor) else None


def gpu_hours(plan: SweepPlan) -> float | None:
    """Upper bound of the sweep's GPU hours from the SLURM time limits (None for local trials); a search's trials
    have the base's executor, ``n_trials`` × seeds of them."""
    if not plan.is_slurm:
        return None
    search = plan.loaded.spec.search
    prepared = ([plan.base] * (search.n_trials * len(plan.loaded.spec.seeds)) if search is not None
                else [t.prepared for t in plan.trials])
    return sum(trial_gpus(p) * p.executor.time_minutes / 60 for p in prepared)


def _check_gpu_budget(plan: SweepPlan) -> None:
    budget = plan.loaded.spec.budget
    hours = gpu_hours(plan)
    if budget is None or budget.max_gpu_hours is None or hours is None:
        return
    if hours > budget.max_gpu_hours:
        raise ConfigError(f"the sweep may use up to {hours:.0f} GPU-hours (trials × GPUs × time limit), over its "
                          f"budget of {budget.max_gpu_hours:g} (Budget.max_gpu_hours)")


def default_sweep_dir(name: str, root: str | Path = "runs") -> Path:
    return Path(root) / "sweeps" / safe_name(name)
