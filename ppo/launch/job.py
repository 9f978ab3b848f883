"""The job body, the same for every executor: build the stored config and call ``run(run_dir)``.

    python -m ppo.launch.job RUN_DIR        # what LocalExecutor runs; also resumes a stopped local run

It imports the run directory's copy of the experiment file under the module name recorded in ``launch.json``
(so classes defined in the file resolve), loads ``config.json``, builds it and calls ``run(run_dir)``.  Calling it
again on the same run directory is how a run resumes: ``run`` finds the trainer's latest checkpoint there
(the trainer's ``resume="auto"``).  ``status.json`` records the outcome; a failure also prints its traceback
(to the job's log) and exits 1.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import os
import socket
import sys
import traceback
from pathlib import Path

import fiddle as fdl

from ppo.config.loading import describe, load_module
from ppo.config.serialization import from_json
from ppo.launch import preemption
from ppo.launch.preemption import Preempted
from ppo.launch.rundir import read_json, write_json

STATUS_FILE = "status.json"


def write_status(run_dir: Path, state: str, **fields) -> None:
    path = Path(run_dir) / STATUS_FILE
    previous = read_json(path) if path.exists() else {}
    now = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    record = {**previous, **fields, "state": state, "updated": now}
    if state == "RUNNING":
        record.update(started=now, host=socket.gethostname(), pid=os.getpid())
        record.pop("error", None)
    write_json(path, record)


def load_stored_config(run_dir: Path):
    """The run's config graph, from ``config.json`` with the experiment file's copy imported first."""
    run_dir = Path(run_dir)
    record = read_json(run_dir / "launch.json")
    load_module(run_dir / "experiment.py", record["module_name"], record["sys_path"])
    return from_json((run_dir / "config.json").read_text())


def run_job(run_dir: str | Path, attempt: int | None = None) -> None:
    """Build the stored experiment and call ``run(run_dir)``, recording RUNNING / COMPLETED / FAILED.

    ``attempt`` counts the times the run was started (SLURM passes its restart count + 1; otherwise one more than
    the last recorded attempt).
    """
    run_dir = Path(run_dir).resolve()
    if attempt is None:
        previous = read_json(run_dir / STATUS_FILE) if (run_dir / STATUS_FILE).exists() else {}
        attempt = int(previous.get("attempt", 0)) + 1
    write_status(run_dir, "RUNNING", attempt=attempt)
    try:
        experiment = fdl.build(load_stored_config(run_dir))
        if _takes_should_stop(experiment.run):
            preemption.stoppable()
            outcome = experiment.run(run_dir, should_stop=preemption.STOP.is_set)
        else:
            outcome = experiment.run(run_dir)
        if outcome == "stopped":
            raise Preempted("stopped at a step boundary for a requeue; the run's latest checkpoint is complete")
    except Preempted as err:
        write_status(run_dir, "PREEMPTED", error=describe(err))
        raise
    except Exception as err:
        write_status(run_dir, "FAILED", error=describe(err))
        raise
    except BaseException as err:
        write_status(run_dir, "INTERRUPTED", error=describe(err))
        raise
    write_status(run_dir, "COMPLETED")


def _takes_should_stop(run) -> bool:
    """Whether an experiment's ``run`` honours stops (``run(run_dir, should_stop=...)``), as the PPO trainer does."""
    try:
        return "should_stop" in inspect.signature(run).parameters
    except (TypeError, ValueError):
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ppo.launch.job RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    if not (run_dir / "config.json").is_file():
        print(f"ppo.launch.job: {run_dir} is not a run directory (no config.json)", file=sys.stderr)
        return 2
    try:
        run_job(run_dir)
    except Exception:  # noqa: BLE001 - the job's entry point: any failure is a traceback and exit status 1
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
