"""The sweep directory and its state file.

::

    runs/sweeps/<name>/             (``--run-dir`` chooses another place)
      sweep.json                    the sweep: file, base, metric, step, mode, the trials (id, overrides, seed)
      sweep.py                      a copy of the sweep file
      state.json                    each trial's state, reason, job ids / PID, rung verdicts, history
      trials/<trial id>/            a normal run directory (``launch.py status|logs|cancel`` work on it)
      slurm/                        submitit's folder for the job arrays (pickles, logs)
      .lock                         held by the driver while it runs (one driver per sweep)

A trial is ``pending`` (not started, or queued on SLURM), ``running``, ``done``, ``failed`` (its error in
``reason``; the next run of the sweep command resubmits it, and it resumes from its checkpoint) or ``stopped``
(cancelled by early stopping, ``reason`` says why; never resubmitted).  ``state.json`` is written atomically after
every change, by the driver only.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from ppo.config.errors import ConfigError
from ppo.launch.rundir import write_json

PENDING, RUNNING, DONE, FAILED, STOPPED = "pending", "running", "done", "failed", "stopped"
STATES = (PENDING, RUNNING, DONE, FAILED, STOPPED)
FINISHED = (DONE, STOPPED)
STATE_FILE = "state.json"
SWEEP_FILE = "sweep.json"
TRIALS = "trials"


def now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


class SweepState:
    """``state.json`` in memory: ``trials[id]`` is a dict of the fields described in the module docstring."""

    def __init__(self, sweep_dir: Path):
        self.dir = Path(sweep_dir)
        self.path = self.dir / STATE_FILE
        self.data: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else {"trials": {}}
        self._lock_file = None

    @property
    def trials(self) -> dict[str, dict]:
        return self.data["trials"]

    def add(self, trial_id: str, **fields: Any) -> dict:
        """The record of ``trial_id``, created ``pending`` with ``fields`` if it is new."""
        if trial_id not in self.trials:
            self.trials[trial_id] = {"state": PENDING, "reason": None, "jobs": [], "attempts": 0, "rungs": {},
                                     "gates": [], "history": [{"time": now(), "state": PENDING}], **fields}
        return self.trials[trial_id]

    def set(self, trial_id: str, state: str, reason: str | None = None, **fields: Any) -> bool:
        """Move a trial to ``state``; returns whether anything changed (and saves then)."""
        assert state in STATES, state
        record = self.trials[trial_id]
        changed = record["state"] != state or record.get("reason") != reason
        record.update(fields)
        if changed:
            record["state"], record["reason"] = state, reason
            record["history"].append({"time": now(), "state": state, **({"reason": reason} if reason else {})})
        self.save()
        return changed

    def run_dir(self, trial_id: str) -> Path:
        return self.dir / TRIALS / trial_id

    def counts(self) -> dict[str, int]:
        return {s: sum(r["state"] == s for r in self.trials.values()) for s in STATES}

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(self.path, self.data)

    def lock(self) -> None:
        """Hold ``.lock`` for the life of this process: a second driver on the same sweep is refused."""
        self.dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.dir / ".lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(f"sweep {self.dir} is being run by {holder}; wait for it or stop it first") from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._lock_file = handle

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


def read_sweep_dir(sweep_dir: Path) -> tuple[dict, dict]:
    """``(sweep.json, state.json)`` of a sweep directory, for reports."""
    sweep_dir = Path(sweep_dir)
    if not (sweep_dir / SWEEP_FILE).is_file():
        raise ConfigError(f"{sweep_dir} is not a sweep directory (no {SWEEP_FILE})")
    state = json.loads((sweep_dir / STATE_FILE).read_text()) if (sweep_dir / STATE_FILE).is_file() else {"trials": {}}
    return json.loads((sweep_dir / SWEEP_FILE).read_text()), state
