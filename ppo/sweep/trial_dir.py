"""A trial's run directory, written as ``launch.py`` writes a run's, by the local driver and by a SLURM array
element that asked the study for its parameters alike."""

from __future__ import annotations

import shutil
from pathlib import Path

from ppo.launch.rundir import GitState, read_json, write_json, write_run_dir
from ppo.sweep.plan import PlannedTrial, SweepPlan


def create_trial_dir(plan: SweepPlan, planned: PlannedTrial, run_dir: Path, git: GitState, sweep_dir: Path) -> None:
    """The trial's run directory, its ``launch.json`` naming the sweep."""
    argv = [str(plan.loaded.base_path), *planned.overrides, "--executor", plan.kind]
    if run_dir.exists() and not (run_dir / "config.json").exists():
        shutil.rmtree(run_dir)  # left half-written by a driver killed while writing it: no job ever ran there
    write_run_dir(planned.prepared, argv, run_dir, git)
    record = read_json(run_dir / "launch.json")
    record["sweep"] = {"id": plan.loaded.name, "dir": str(sweep_dir), "trial": planned.trial.id}
    write_json(run_dir / "launch.json", record)
