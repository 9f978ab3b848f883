"""SLURM trials: one submitit job array per submission, its concurrency capped by ``%N`` (array parallelism).

Every element of the array is the same :class:`~ppo.launch.slurm_job.SlurmJob` that ``launch.py`` submits for a
single run (a Ray cluster across the trial's nodes, the driver on node 0, requeue on preemption), pointed at the
trial's run directory.  The array is submitted with ``executor.batch()`` from one ``submitit.SlurmExecutor`` whose
folder is ``SWEEP_DIR/slurm``; each trial's ``job.json`` names its element (``<array id>_<index>``) and that
folder, so ``launch.py status|logs|cancel TRIAL_DIR`` work on it as on any SLURM run.

Trials whose executors ask for different sbatch settings (an axis over ``executor.*``) go out as one array per
distinct setting.  States come from one ``sacct`` call per poll for all trials (submitit's shared watcher);
cancelling is submitit's ``job.cancel()`` (``scancel <array id>_<index>``).
"""

from __future__ import annotations

import json
from pathlib import Path

import submitit
from submitit.slurm.slurm import _make_sbatch_string

from ppo.config.errors import ConfigError
from ppo.launch.executors import SlurmExecutor, executor_from_record
from ppo.launch.job import STATUS_FILE
from ppo.launch.rundir import read_json, write_json
from ppo.launch.slurm import FAILURE, captured_stderr, failure_detail, python_command, sbatch_parameters
from ppo.launch.slurm_job import SlurmJob
from ppo.sweep.state import DONE, FAILED, PENDING, RUNNING

FOLDER = "slurm"
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "UNKNOWN", "SUSPENDED"}
ACTIVE = {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"}


def array_sbatch(executor: SlurmExecutor, job_name: str, folder: Path, count: int, parallelism: int) -> str:
    """The sbatch script of an array of ``count`` trials, ``parallelism`` at a time (what ``--dry-run`` shows)."""
    command = f"{python_command(executor)} -u -m submitit.core._submit {folder}"
    params = sbatch_parameters(executor, job_name)
    if count > 1:
        params.update(map_count=count, array_parallelism=parallelism)
    return _make_sbatch_string(command=command, folder=folder, **params)


def _executor_of(run_dir: Path) -> SlurmExecutor:
    return executor_from_record(read_json(Path(run_dir) / "launch.json")["executor"])


def submit_array(folder: Path, job_name: str, run_dirs: list[Path], parallelism: int) -> list[str]:
    """Submit the trials in ``run_dirs`` (one array per distinct sbatch setting); returns their job ids in order.

    Each run directory's ``job.json`` is written with its job id.  A refusal by sbatch is a :class:`ConfigError`
    with sbatch's own line.
    """
    folder = Path(folder).resolve()
    groups: dict[str, list[int]] = {}
    executors = [_executor_of(d) for d in run_dirs]
    for i, executor in enumerate(executors):
        key = json.dumps([sbatch_parameters(executor, job_name), executor.max_requeues, python_command(executor)],
                         sort_keys=True, default=str)
        groups.setdefault(key, []).append(i)
    ids: list[str | None] = [None] * len(run_dirs)
    for members in groups.values():
        executor = executors[members[0]]
        jobs = _submit(folder, job_name, executor, [SlurmJob(str(Path(run_dirs[i]).resolve())) for i in members],
                       parallelism)
        for i, job in zip(members, jobs):
            ids[i] = str(job.job_id)
            write_json(Path(run_dirs[i]) / "job.json", {"executor": "slurm", "job_id": ids[i], "folder": str(folder),
                                                        "tasks": executors[i].nodes})
    return [str(i) for i in ids]


def submit_search_array(folder: Path, job_name: str, executor: SlurmExecutor, count: int, parallelism: int,
                        task) -> list[str]:
    """Submit ``count`` elements of a searched sweep, each the same ``task``
    (:class:`~ppo.sweep.slurm_search.SearchTask`: it asks the study for its configuration when it starts)."""
    return [str(job.job_id) for job in _submit(Path(folder).resolve(), job_name, executor, [task] * count,
                                               parallelism)]


def _submit(folder: Path, job_name: str, executor: SlurmExecutor, callables: list, parallelism: int) -> list:
    """One job array of ``callables`` with ``executor``'s sbatch settings, ``parallelism`` at a time."""
    with captured_stderr() as captured:
        try:
            slurm = submitit.SlurmExecutor(folder=folder, max_num_timeout=executor.max_requeues,
                                           python=python_command(executor))
            slurm.update_parameters(**sbatch_parameters(executor, job_name),
                                    array_parallelism=max(1, min(parallelism, len(callables))))
            with slurm.batch():
                jobs = [slurm.submit(c) for c in callables]
            error = None
        except Exception as err:  # noqa: BLE001 - sbatch's refusal comes as several exception types
            error = err
    if error is not None:
        lines = [ln.strip() for ln in ("".join(captured) + "\n" + str(error)).splitlines() if ln.strip()]
        flagged = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
        detail = (flagged or lines or [type(error).__name__])[-1]
        raise ConfigError(f"sbatch refused the sweep's job array: {detail}")
    return jobs


def _handle(folder: Path, job_id: str):
    return submitit.SlurmJob(folder=Path(folder), job_id=str(job_id))


def poll_states(folder: Path, job_ids: list[str]) -> dict[str, str]:
    """SLURM's state of each job (``PENDING``, ``RUNNING``, ``COMPLETED``, ``CANCELLED`` ...), one ``sacct`` call."""
    if not job_ids:
        return {}
    handles = [_handle(folder, j) for j in job_ids]
    watcher = handles[0].watcher
    watcher.update()
    return {j: (watcher.get_state(j, mode="cache") or "UNKNOWN").split()[0] for j in job_ids}


def trial_outcome(run_dir: Path, job_id: str, slurm_state: str) -> tuple[str, str | None]:
    """The trial state for SLURM's state of its job: ``(pending|running|done|failed, reason)``."""
    if slurm_state in QUEUED:
        return PENDING, None
    if slurm_state in ACTIVE:
        return RUNNING, None
    path = Path(run_dir) / STATUS_FILE
    status = read_json(path) if path.exists() else {}
    if slurm_state == "COMPLETED":
        if status.get("state") == "COMPLETED":
            return DONE, None
        return FAILED, status.get("error") or f"SLURM job {job_id} completed without the run recording COMPLETED"
    detail = status.get("error") if status.get("state") == "FAILED" else None
    if detail is None and slurm_state in FAILURE - {"CANCELLED"}:  # a cancelled job's log says only that
        record = read_json(Path(run_dir) / "job.json")
        detail = failure_detail(Path(run_dir), record)
    return FAILED, f"SLURM job {job_id} {slurm_state}" + (f": {detail}" if detail else "")


def cancel(folder: Path, job_id: str) -> None:
    _handle(folder, job_id).cancel(check=True)
