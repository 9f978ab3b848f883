"""``launch.py status|logs|cancel RUN_DIR``: a launched run, found through its ``job.json`` and ``status.json``.

``status`` prints one line ``RUN_DIR: <executor> job <id> <STATE>[: error]`` and exits 0 while the run is pending,
running or completed, 1 when it failed, was cancelled or died (``--wait`` polls until it ends).  SLURM's state comes
from ``sacct`` through submitit; the error is the one line the job wrote to ``status.json`` (or submitit's record
of node 0's exception).  ``logs`` prints the job's output (every SLURM task's stdout and stderr).  ``cancel``
runs ``scancel`` for a SLURM job, or sends SIGTERM to a local job's process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ppo.config.errors import ConfigError
from ppo.launch import slurm
from ppo.launch.job import STATUS_FILE
from ppo.launch.local import LOG_FILE
from ppo.launch.rundir import read_json

IN_PROGRESS = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "RESIZING", "SUSPENDED", "UNKNOWN",
               "REQUEUE_HOLD", "REQUEUE_FED", "STAGE_OUT", "SIGNALING"}


def _records(run_dir: Path) -> tuple[dict, dict]:
    if not (run_dir / "launch.json").is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no launch.json)")
    if not (run_dir / "job.json").is_file():
        raise ConfigError(f"{run_dir} has no job.json: the run was prepared but never started")
    status = read_json(run_dir / STATUS_FILE) if (run_dir / STATUS_FILE).is_file() else {}
    return read_json(run_dir / "job.json"), status


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def current_state(run_dir: Path) -> tuple[str, str]:
    """``(state, description line)`` of the run."""
    job, status = _records(run_dir)
    error = status.get("error")
    if job["executor"] == "slurm":
        try:
            state = slurm.job_state(run_dir, job)
        except (OSError, subprocess.SubprocessError) as err:
            raise ConfigError(f"cannot ask SLURM about job {job['job_id']} (sacct): {err}") from None
        if state in slurm.FAILURE and not error:
            error = slurm.failure_detail(run_dir, job)
        if state in slurm.SUCCESS and status.get("state") == "FAILED":
            state = "FAILED"
        label = f"SLURM job {job['job_id']}"
        attempt = status.get("attempt")
        if attempt and attempt > 1:
            label += f" (attempt {attempt})"
    else:
        state = status.get("state", "RUNNING")
        if state == "RUNNING" and status.get("host", socket.gethostname()) == socket.gethostname():
            pid = status.get("pid", job.get("pid"))
            if pid and not _pid_alive(int(pid)):
                state, error = "DIED", error or "the job process is gone without recording an outcome"
        label = f"{job['executor']} job (pid {job.get('pid')})"
    line = f"{run_dir}: {label} {state}" + (f": {error}" if error and state not in slurm.SUCCESS else "")
    return state, line


def status(run_dir: Path, wait: bool = False, poll_s: float = 2.0, out=None) -> int:
    out = out or sys.stdout
    state, line = current_state(run_dir)
    while wait and state in IN_PROGRESS:
        time.sleep(poll_s)
        state, line = current_state(run_dir)
    print(line, file=out)
    return 0 if state in IN_PROGRESS or state in slurm.SUCCESS else 1


def logs(run_dir: Path, out=None) -> int:
    out = out or sys.stdout
    job, _ = _records(run_dir)
    paths = slurm.task_logs(run_dir, job) if job["executor"] == "slurm" else [run_dir / LOG_FILE]
    for path in paths:
        print(f"==> {path} <==", file=out)
        print(path.read_text(errors="replace") if path.exists() else "(not written yet)", file=out)
    return 0


def cancel(run_dir: Path, out=None) -> int:
    out = out or sys.stdout
    job, status_record = _records(run_dir)
    if job["executor"] == "slurm":
        slurm.cancel(run_dir, job)
        print(f"{run_dir}: cancelled SLURM job {job['job_id']}", file=out)
        return 0
    pid = status_record.get("pid", job.get("pid"))
    if status_record.get("state") not in (None, "RUNNING") or not pid or not _pid_alive(int(pid)):
        raise ConfigError(f"{run_dir}: nothing to cancel (the {job['executor']} job is not running)")
    os.kill(int(pid), signal.SIGTERM)
    print(f"{run_dir}: sent SIGTERM to pid {pid}", file=out)
    return 0
