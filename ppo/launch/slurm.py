"""SLURM through submitit: the sbatch script, submission, and the job's state, logs and cancellation.

The script is submitit's own (``_make_sbatch_string``, the function its ``SlurmExecutor`` writes submissions
with), so ``--dry-run`` prints exactly what ``sbatch`` receives.  It runs one task per node
(``srun ... python -u -m submitit.core._submit RUN_DIR/slurm``), each unpickling a
:class:`~ppo.launch.slurm_job.SlurmJob`.  submitit's files (the pickles, ``<jobid>_<task>_log.out/err``) live in
``RUN_DIR/slurm``; the run directory must be on a filesystem every node sees.

:func:`check_submission` is what must hold before anything goes to SLURM, a run (``launch.py``) or a sweep's job
array (:mod:`ppo.sweep`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import submitit
from submitit.core.utils import JobPaths
from submitit.slurm.slurm import _make_sbatch_string

from ppo.config.errors import ConfigError
from ppo.launch import rundir
from ppo.launch.executors import SlurmExecutor
from ppo.launch.rundir import GitState, write_json

FOLDER = "slurm"
SUCCESS = {"COMPLETED"}
FAILURE = {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def python_command(executor: SlurmExecutor) -> str:
    if executor.python:
        return executor.python
    return "python" if executor.container_image else shlex.quote(sys.executable)


def _mem(mem_gb: float) -> str:
    return f"{int(mem_gb)}GB" if float(mem_gb).is_integer() else f"{int(mem_gb * 1024)}MB"


def sbatch_parameters(executor: SlurmExecutor, job_name: str) -> dict:
    """The keyword arguments of submitit's ``SlurmExecutor.update_parameters`` for this executor."""
    params: dict = {"job_name": job_name, "nodes": executor.nodes, "ntasks_per_node": 1,
                    "time": executor.time_minutes, "signal_delay_s": executor.signal_delay_s}
    if executor.gpus_per_node:
        params["gpus_per_node"] = executor.gpus_per_node
    for name in ("partition", "account", "qos", "cpus_per_task"):
        if getattr(executor, name) is not None:
            params[name] = getattr(executor, name)
    if executor.mem_gb is not None:
        params["mem"] = _mem(executor.mem_gb)
    elif (executor.additional_parameters or {}).get("exclusive"):
        params["mem"] = "0"  # all of each node's memory: --exclusive alone leaves --mem at the cluster's default
    if executor.setup_lines:
        params["setup"] = list(executor.setup_lines)
    if executor.additional_parameters:
        params["additional_parameters"] = dict(executor.additional_parameters)
    srun_args = []
    if executor.cpus_per_task is not None:
        # the job step's own count: under SLURM_EXACT, or an srun that does not read the job's, it gets 1 CPU a task
        srun_args.append(f"--cpus-per-task={executor.cpus_per_task}")
    if executor.container_image:
        srun_args.append(f"--container-image={executor.container_image}")
        if executor.container_mounts:
            srun_args.append(f"--container-mounts={executor.container_mounts}")
    if srun_args:
        params["srun_args"] = srun_args
    return params


def _command(executor: SlurmExecutor, folder: Path) -> str:
    return " ".join([python_command(executor), "-u -m submitit.core._submit", shlex.quote(str(folder))])


def render_sbatch(executor: SlurmExecutor, job_name: str, run_dir: Path) -> str:
    """The sbatch script submitit would submit for this run directory."""
    folder = Path(run_dir) / FOLDER
    try:
        return _make_sbatch_string(command=_command(executor, folder), folder=folder,
                                   **sbatch_parameters(executor, job_name))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"executor settings do not make an sbatch script: {err}") from None


def submit(executor: SlurmExecutor, job_name: str, run_dir: Path) -> str:
    """Submit the run; records ``job.json`` and returns the SLURM job id."""
    from ppo.launch.slurm_job import SlurmJob  # psutil with it: the job's code, not the dry run's

    run_dir = Path(run_dir).resolve()
    folder = run_dir / FOLDER
    with captured_stderr() as captured:
        try:
            slurm = submitit.SlurmExecutor(folder=folder, max_num_timeout=executor.max_requeues,
                                           python=python_command(executor))
            slurm.update_parameters(**sbatch_parameters(executor, job_name))
            job = slurm.submit(SlurmJob(str(run_dir)))
            error = None
        except Exception as err:  # noqa: BLE001 - sbatch's refusal comes as several exception types
            error = err
    if error is not None:
        lines = [line.strip() for line in ("".join(captured) + "\n" + str(error)).splitlines() if line.strip()]
        flagged = [line for line in lines if "error" in line.lower() or "fatal" in line.lower()]
        detail = (flagged or lines or [type(error).__name__])[-1]
        raise ConfigError(f"sbatch refused the job: {detail}")
    write_json(run_dir / "job.json", {"executor": "slurm", "job_id": job.job_id, "folder": FOLDER,
                                      "tasks": executor.nodes})
    return job.job_id


@contextlib.contextmanager
def captured_stderr():
    """Collect what child processes (sbatch) write to file descriptor 2, so a refusal can be told in one line.

    Yields a list that holds the captured text once the block has ended.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    captured: list[str] = []
    with tempfile.TemporaryFile(mode="w+", errors="replace") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read())


def check_submission(*, allow_dirty: bool, yes: bool, shown_by_dry_run: str, diff_saved_in: str, subject: str,
                     question: str) -> GitState | None:
    """What must hold before anything goes to SLURM (a run or a sweep): ``sbatch`` on this machine, a clean tree
    (or ``allow_dirty``), and the user's yes (``yes``, or an answer to ``question`` on a terminal).

    ``shown_by_dry_run``, ``diff_saved_in`` and ``subject`` complete the error messages.  Returns the git state to
    record, or None when the user answered no; raises :class:`ConfigError` for what is missing.
    """
    if shutil.which("sbatch") is None:
        raise ConfigError("the SLURM executor needs sbatch on this machine (not found on PATH); --dry-run shows "
                          f"{shown_by_dry_run} without it")
    repo = rundir.REPO_ROOT
    git = rundir.git_state(repo)
    if git.dirty and not allow_dirty:
        raise ConfigError(f"the git tree at {repo} has uncommitted changes; commit them or pass "
                          f"--allow-dirty (the diff is saved in {diff_saved_in})")
    if not yes:
        if not sys.stdin.isatty():
            raise ConfigError(f"submitting {subject} to SLURM needs confirmation: pass --yes")
        if input(question).strip().lower() not in ("y", "yes"):
            return None
    return git


def job_handle(run_dir: Path, record: dict):
    return submitit.SlurmJob(folder=Path(run_dir) / record["folder"], job_id=str(record["job_id"]),
                             tasks=range(int(record.get("tasks", 1))))


def job_state(run_dir: Path, record: dict) -> str:
    """SLURM's state of the job through ``sacct`` (e.g. PENDING, RUNNING, COMPLETED, FAILED, CANCELLED)."""
    info = job_handle(run_dir, record).get_info(mode="force")
    state = (info.get("State") or "UNKNOWN").split()[0]
    return state


def task_logs(run_dir: Path, record: dict) -> list[Path]:
    folder = Path(run_dir) / record["folder"]
    paths = []
    for task in range(int(record.get("tasks", 1))):
        job_paths = JobPaths(folder, job_id=str(record["job_id"]), task_id=task)
        paths += [job_paths.stdout, job_paths.stderr]
    return paths


def failure_detail(run_dir: Path, record: dict) -> str | None:
    """The last line of node 0's exception as submitit recorded it, when the job did not write status.json."""
    try:
        exc = job_handle(run_dir, record).exception()
    except Exception:  # noqa: BLE001 - no result file, or an unreadable one
        return None
    if exc is None:
        return None
    lines = str(exc).splitlines()
    rules = [i for i, line in enumerate(lines) if len(line.strip()) > 3 and set(line.strip()) == {"-"}]
    if len(rules) >= 2:
        lines = lines[rules[0] + 1:rules[1]]
    lines = [line.strip() for line in lines if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def cancel(run_dir: Path, record: dict) -> None:
    job_handle(run_dir, record).cancel(check=True)
