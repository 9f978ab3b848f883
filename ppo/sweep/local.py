"""Local trials: each one ``python -m ppo.launch.job RUN_DIR`` in a child process of the sweep driver.

A trial's output goes to ``RUN_DIR/job.log`` (several trials may run at once, so nothing is streamed to the
terminal); ``job.json`` records its PID as ``launch.py``'s local runs do, so ``launch.py status|logs|cancel RUN_DIR``
work on a trial too.  Each job starts in a session of its own, so a Ctrl-C at the driver's terminal does not reach
it; the driver stops it.

Stopping a trial kills its process tree by PID: the tree (the job, the Ray processes it started, their workers) is
listed first, then every process in it gets SIGTERM, and whatever is left after ``grace_s`` gets SIGKILL.  A trial
left running by a driver that died is adopted by the next driver (found by its PID, checked to be the job of that
run directory) and followed until it ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from ppo.launch.executors import LocalExecutor, executor_from_record
from ppo.launch.job import STATUS_FILE
from ppo.launch.local import LOG_FILE
from ppo.launch.rundir import read_json, write_json
from ppo.sweep.state import DONE, FAILED


def kill_tree(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process ``pid`` and all its descendants (listed before any is signalled), SIGKILL what remains."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in family:
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


def outcome(run_dir: Path, returncode: int | None) -> tuple[str, str | None]:
    """``(done|failed, reason)`` of an ended job, from its exit status and ``status.json``."""
    path = Path(run_dir) / STATUS_FILE
    status = read_json(path) if path.exists() else {}
    if status.get("state") == "COMPLETED" and returncode in (0, None):
        return DONE, None
    if status.get("error"):
        return FAILED, status["error"]
    if returncode is not None and returncode < 0:
        return FAILED, f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
    if returncode:
        return FAILED, f"exit status {returncode}"
    return FAILED, f"the job ended without recording an outcome (status {status.get('state', 'missing')})"


def _is_job_of(proc: psutil.Process, run_dir: Path) -> bool:
    try:
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return "ppo.launch.job" in cmdline and any(Path(a).resolve() == run_dir.resolve() for a in cmdline if "/" in a)


class LocalTrials:
    """The running local trials of one driver: started, adopted, polled and killed by PID."""

    def __init__(self, grace_s: float = 10.0):
        self.grace_s = grace_s
        self._children: dict[str, subprocess.Popen] = {}
        self._adopted: dict[str, psutil.Process] = {}
        self._dirs: dict[str, Path] = {}

    def __len__(self) -> int:
        return len(self._children) + len(self._adopted)

    def __contains__(self, trial_id: str) -> bool:
        return trial_id in self._children or trial_id in self._adopted

    def start(self, trial_id: str, run_dir: Path) -> int:
        run_dir = Path(run_dir).resolve()
        record = read_json(run_dir / "launch.json").get("executor") or {"kind": "local"}
        executor = executor_from_record(record) if record.get("kind") == "local" else LocalExecutor()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(executor.env or {})}
        env.setdefault("RAY_AUTH_MODE", "disabled")
        with open(run_dir / LOG_FILE, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "ppo.launch.job", str(run_dir)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        write_json(run_dir / "job.json", {"executor": "local", "pid": proc.pid, "log": LOG_FILE})
        self._children[trial_id] = proc
        self._dirs[trial_id] = run_dir
        return proc.pid

    def adopt(self, trial_id: str, pid: int | None, run_dir: Path) -> bool:
        """Follow a job an earlier driver started, if ``pid`` is still that job; returns whether it was."""
        if not pid:
            return False
        try:
            proc = psutil.Process(int(pid))
        except psutil.NoSuchProcess:
            return False
        if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE or not _is_job_of(proc, Path(run_dir)):
            return False
        self._adopted[trial_id] = proc
        self._dirs[trial_id] = Path(run_dir)
        return True

    def poll(self, trial_id: str) -> tuple[str, str | None] | None:
        """None while the trial runs; ``(done|failed, reason)`` once it has ended (then it is forgotten)."""
        if trial_id in self._children:
            code = self._children[trial_id].poll()
            if code is None:
                return None
            del self._children[trial_id]
            return outcome(self._dirs.pop(trial_id), code)
        proc = self._adopted[trial_id]
        if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
            return None
        del self._adopted[trial_id]
        return outcome(self._dirs.pop(trial_id), None)

    def stop(self, trial_id: str) -> None:
        """Kill the trial's process tree and forget it."""
        if trial_id in self._children:
            proc = self._children.pop(trial_id)
            kill_tree(proc.pid, self.grace_s)
            proc.wait()
        elif trial_id in self._adopted:
            kill_tree(self._adopted.pop(trial_id).pid, self.grace_s)
        self._dirs.pop(trial_id, None)

    def ids(self) -> list[str]:
        return [*self._children, *self._adopted]
