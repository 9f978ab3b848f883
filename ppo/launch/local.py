"""Running a prepared run directory on this machine: in a child process (local) or in this process (debug)."""

from __future__ import annotations

import os
import pdb
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import TextIO

from ppo.launch.executors import DebugExecutor, LocalExecutor
from ppo.launch.job import run_job
from ppo.launch.rundir import write_json

LOG_FILE = "job.log"


def _tee(stream, sinks: list[TextIO]) -> None:
    for line in iter(stream.readline, ""):
        for sink in sinks:
            sink.write(line)
            sink.flush()


def run_local(run_dir: Path, executor: LocalExecutor, echo: TextIO | None = None) -> int:
    """``python -m ppo.launch.job RUN_DIR`` in a child process; its output to ``echo`` and ``RUN_DIR/job.log``.

    Returns the child's exit status.  Ctrl-C reaches the child too (same terminal); the child is given 30 s to
    finish its ``finally`` blocks, then killed.
    """
    echo = echo if echo is not None else sys.stdout
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(executor.env or {})}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    with open(Path(run_dir) / LOG_FILE, "a", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ppo.launch.job", str(run_dir)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, text=True,
                                errors="replace")
        write_json(Path(run_dir) / "job.json", {"executor": "local", "pid": proc.pid, "log": LOG_FILE})
        reader = threading.Thread(target=_tee, args=(proc.stdout, [echo, log]), daemon=True)
        reader.start()
        try:
            returncode = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            returncode = proc.returncode or 1
        reader.join(10)
    return returncode


def run_debug(run_dir: Path, executor: DebugExecutor) -> int:
    """The job in this process (``breakpoint()`` works); a failure prints its traceback, and pdb if asked."""
    write_json(Path(run_dir) / "job.json", {"executor": "debug", "pid": os.getpid()})
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        run_job(run_dir)
    except Exception:  # noqa: BLE001 - any failure of the job prints its traceback (and pdb if asked)
        traceback.print_exc()
        if executor.post_mortem:
            pdb.post_mortem(sys.exc_info()[2])
        return 1
    return 0
