"""``launch.py`` as a SLURM submit host shows it to the nightly runner, without a cluster.

    python tests/nightly/fake_launch.py EXPERIMENT [path=value ...] [--fiddler F] --executor slurm --yes --run-dir D
    python tests/nightly/fake_launch.py status D --wait | cancel D

A submission runs the real ``launch.py`` with ``--executor local`` instead (so the run directory is the real one,
and the job runs here, at once), records its own command line in ``D/argv.json``, and exits 0 whatever became of
the job, as a submission does; a config that ``launch.py`` refuses exits 2 with its one line. ``status D --wait``
prints ``D: SLURM job 42 <state>`` from the job's ``status.json`` (``: <error>`` after a failure) and exits 0 for
COMPLETED, 1 otherwise. After the override ``fake.slurm_hang=True`` the job counts as RUNNING until ``cancel D``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOB_ID = 42
QUEUE_STATE = "fake_slurm_state"
"""The state a hung job is held in (``RUNNING``, then ``CANCELLED``), written beside the job's own files."""


def submit(argv: list[str]) -> int:
    run_dir = Path(argv[argv.index("--run-dir") + 1])
    local = [*argv]
    local[local.index("--executor") + 1] = "local"
    done = subprocess.run([sys.executable, str(REPO / "launch.py"), *local], capture_output=True, text=True)
    if done.returncode == 2:
        sys.stderr.write(done.stderr)
        return 2
    (run_dir / "argv.json").write_text(json.dumps(argv))
    if "fake.slurm_hang=True" in argv:
        (run_dir / QUEUE_STATE).write_text("RUNNING")
    print(f"submitted SLURM job {JOB_ID}; follow it with: launch.py status {run_dir}")
    return 0


def status(run_dir: Path, wait: bool) -> int:
    state, error = job_state(run_dir)
    while wait and state == "RUNNING":
        time.sleep(0.1)
        state, error = job_state(run_dir)
    print(f"{run_dir}: SLURM job {JOB_ID} {state}" + (f": {error}" if error else ""))
    return 0 if state == "COMPLETED" else 1


def job_state(run_dir: Path) -> tuple[str, str]:
    held = run_dir / QUEUE_STATE
    if held.is_file():
        return held.read_text(), ""
    record = json.loads((run_dir / "status.json").read_text())
    return record["state"], record.get("error", "")


def main(argv: list[str]) -> int:
    if argv[:1] == ["status"]:
        return status(Path(argv[1]), "--wait" in argv)
    if argv[:1] == ["cancel"]:
        (Path(argv[1]) / QUEUE_STATE).write_text("CANCELLED")
        return 0
    return submit(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
