"""A searched sweep on SLURM: array elements that each ask the study for their configuration when they start.

The driver submits ``n_trials`` elements (``%N`` at a time), every one the same :class:`SearchTask`.  When an
element starts, its node 0, holding ``SWEEP_DIR/search/.lock``:

1. opens the sweep's study (the journal file in the sweep directory on the shared filesystem, or the database the
   sweep names) and asks it for a configuration (Optuna's ask), from every result told so far, by any element;
2. prepares the trial as the driver prepares a local search's (the sweep file and the driver's common overrides
   from ``sweep.json``; its Ray port and addresses from the study trial's number) and writes its run directory
   ``SWEEP_DIR/trials/<id>`` and ``job.json`` (so ``launch.py status|logs|cancel TRIAL_DIR`` work on it);
3. writes its claim ``SWEEP_DIR/search/<array id>_<index>.json`` (the study trial's number, the trial id, point and
   seed), which the driver reads to follow the trial; a configuration the base refuses, or one that repeats an
   earlier trial, is told failed and claimed as ``refused``.

Then every node runs the trial exactly as a single SLURM run (:func:`ppo.launch.slurm_job.run_node`), and node 0
tells the study the sweep's metric at the sweep's step when the run completed.  A requeued element (preemption)
reads its claim again instead of asking.  Pruned, failed and cancelled trials are told by the driver
(:mod:`ppo.sweep.runner`), which also resubmits failed trials as plain elements on the next call.
"""

from __future__ import annotations

import fcntl
import math
from contextlib import contextmanager
from pathlib import Path

import submitit

from ppo.config.errors import ConfigError
from ppo.launch.job import STATUS_FILE
from ppo.launch.rundir import GitState, read_json, write_json
from ppo.launch.slurm_job import SlurmJob, _say, _wait_for, run_node

CLAIMS = "search"
"""``SWEEP_DIR/search/``: one claim per array element that asked the study."""
CLAIM_TIMEOUT_S = 600.0


def claim_path(sweep_dir: Path, job_id: str) -> Path:
    return Path(sweep_dir) / CLAIMS / f"{job_id}.json"


def read_claims(sweep_dir: Path) -> dict[str, dict]:
    """Every element's claim, by its job id (``<array id>_<index>``)."""
    folder = Path(sweep_dir) / CLAIMS
    return {p.stem: read_json(p) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


@contextmanager
def claims_locked(sweep_dir: Path):
    """The lock one element holds while it asks and claims (and the driver while it reads the study's state)."""
    folder = Path(sweep_dir) / CLAIMS
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class SearchTask(SlurmJob):
    """The submitted callable of every element of a searched sweep's array (see the module docstring)."""

    def __init__(self, sweep_dir: str, git: GitState):
        super().__init__("")
        self.sweep_dir = sweep_dir
        self.git = git

    def __call__(self) -> None:
        env = submitit.JobEnvironment()
        sweep_dir = Path(self.sweep_dir)
        path = claim_path(sweep_dir, env.job_id)
        if env.global_rank == 0 and not path.exists():
            ask_and_claim(sweep_dir, env.job_id, self.git)
        claim = _wait_for(lambda: read_json(path) if path.exists() else None, CLAIM_TIMEOUT_S, f"the claim {path}")
        if claim.get("refused"):
            _say(f"study trial {claim['search']} refused: {claim['refused']}")
            return
        self.run_dir = str(sweep_dir / claim["run_dir"])
        run_node(Path(self.run_dir))
        if env.global_rank == 0:
            tell_completed(sweep_dir, claim)

    def checkpoint(self, *args, **kwargs):
        if not self.run_dir:  # signalled before it asked: the requeued element asks then
            return submitit.helpers.DelayedSubmission(self, *args, **kwargs)
        return super().checkpoint(*args, **kwargs)


def _plan(sweep_dir: Path):
    from ppo.sweep.plan import plan_sweep
    from ppo.sweep.spec import load_sweep
    from ppo.sweep.state import SWEEP_FILE

    record = read_json(sweep_dir / SWEEP_FILE)
    loaded = load_sweep(record["sweep_file"])
    extra = record["common_overrides"][len(loaded.spec.overrides):]
    return plan_sweep(loaded, "slurm", extra, bounds=False)


def ask_and_claim(sweep_dir: Path, job_id: str, git: GitState) -> dict:
    """Ask the study for one configuration, prepare its trial and run directory, and write the element's claim."""
    from optuna.trial import TrialState

    from ppo.sweep.plan import plan_trial
    from ppo.sweep.search import open_study, optuna_distributions
    from ppo.sweep.slurm import FOLDER
    from ppo.sweep.trial_dir import create_trial_dir

    plan = _plan(sweep_dir)
    spec = plan.loaded.spec
    with claims_locked(sweep_dir):
        study = open_study(spec.search, sweep_dir, plan.loaded.name, spec.maximize)
        asked = study.ask(optuna_distributions(spec.search))
        point = {p: asked.params[p] for p in spec.search.space}
        claim = {"search": asked.number, "point": point, "seed": spec.seeds[0], "job_id": job_id}
        try:
            planned = plan_trial(plan, point, spec.seeds[0], asked.number)
        except ConfigError as err:
            claim["refused"] = str(err)
        else:
            run_dir = sweep_dir / "trials" / planned.trial.id
            if (run_dir / "config.json").exists():
                earlier = read_json(run_dir / "launch.json").get("sweep", {}).get("search")
                claim["refused"] = f"repeats the configuration of study trial {earlier}"
            else:
                create_trial_dir(plan, planned, run_dir, git, sweep_dir)
                record = read_json(run_dir / "launch.json")
                record["sweep"]["search"] = asked.number
                write_json(run_dir / "launch.json", record)
                write_json(run_dir / "job.json", {"executor": "slurm", "job_id": job_id,
                                                  "folder": str(sweep_dir / FOLDER), "tasks": plan.base.executor.nodes})
                claim.update(trial=planned.trial.id, run_dir=f"trials/{planned.trial.id}",
                             config_id=planned.trial.config_id, label=planned.trial.label())
        if claim.get("refused"):
            study.tell(asked.number, state=TrialState.FAIL)
        write_json(claim_path(sweep_dir, job_id), claim)
    _say(f"study trial {asked.number}: " + " ".join(f"{p}={v!r}" for p, v in point.items()))
    return claim


def tell_completed(sweep_dir: Path, claim: dict) -> None:
    """Tell the study the sweep's metric at the sweep's step, when the run completed and logged it (anything else
    is the driver's to tell: a stop it decided, or a failure it may resubmit)."""
    from ppo.metrics import last_step, load_metrics
    from ppo.sweep.search import open_study
    from ppo.sweep.spec import load_sweep
    from ppo.sweep.state import SWEEP_FILE
    from ppo.sweep.stopping import value_at

    run_dir = sweep_dir / claim["run_dir"]
    status = read_json(run_dir / STATUS_FILE) if (run_dir / STATUS_FILE).exists() else {}
    if status.get("state") != "COMPLETED" or not (run_dir / "metrics.jsonl").exists():
        return
    spec = load_sweep(read_json(sweep_dir / SWEEP_FILE)["sweep_file"]).spec
    data = load_metrics(run_dir / "metrics.jsonl")
    if (last_step(data) or 0) < spec.step:
        return
    value = value_at(data.get(spec.metric, {}), spec.step)
    if value is None or not math.isfinite(value):
        return
    study = open_study(spec.search, sweep_dir, read_json(sweep_dir / SWEEP_FILE)["id"], spec.maximize)
    study.tell(claim["search"], value, skip_if_finished=True)
    _say(f"told study trial {claim['search']}: {spec.metric} = {value:.6g} at step {spec.step}")
