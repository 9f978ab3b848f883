"""The waits a user meets first: the default's set-up before its first PPO step, and the dry run of a big recipe,
each against a baseline tree measured in the same invocation.

    .venv/bin/python bench/setup_time.py                    # this tree against eb7622a~1 (before issue 39)
    .venv/bin/python bench/setup_time.py --baseline HEAD~3 --repeats 5 --runs 2

The baseline is a ``git worktree`` of ``--baseline`` in a temporary folder, run with this checkout's ``.venv``.  The
two trees take turns (baseline, this, baseline, this, ...) so that a change in the machine's load hits both.

- **set-up**: ``launch.py experiments/tiny_cpu.py trainer.max_steps=1``, ``--runs`` times per tree; the phases are
  the run's own ``timing/setup/*`` (step 0 of its ``metrics.jsonl``), each run's and their medians; ``other`` is the
  total less the three phases (the initial model, the data, the tokenizer, the first refit).  Each tree has a fresh
  warm-start cache for the invocation (``PPO_WARM_START_CACHE``): its first run fills it, later runs (of a tree that
  has the cache) load it.  The first run of a tree also pays what a first run on a machine pays (see the README);
  compare second runs.  Every run's records less
  ``timing/*`` are compared: a set-up made faster must leave them equal to the bit (where the baseline is a commit
  whose numbers no other change moved).
- **dry run**: ``launch.py experiments/dsr1_7b.py --executor slurm --dry-run`` wall time and CPU time (user +
  system, the steadier of the two when other jobs share the cores), medians of ``--repeats`` after one untimed run.

Numbers are seconds on this machine in this invocation; on a shared machine, hold its lock while this runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
PHASES = ("ray", "warm_start", "workers", "other", "total")
DRY_RUN = ["experiments/dsr1_7b.py", "--executor", "slurm", "--dry-run"]


def tree_env(tree: Path, warm_start_cache: Path | None = None) -> dict[str, str]:
    """The environment a tree's commands run in: its own ``ppo`` first on the path (the driver's and, through the
    environment Ray's workers inherit, every worker's), and Python's bytecode cache written and read as in a user's
    shell (``PYTHONDONTWRITEBYTECODE``, set in some sandboxes, recompiles every module of the tree on each run:
    ~0.17 s of a dry run here); ``warm_start_cache``: where its runs keep the warm start (``PPO_WARM_START_CACHE``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if warm_start_cache is not None:
        env["PPO_WARM_START_CACHE"] = str(warm_start_cache)
    return {**env, "PYTHONPATH": str(tree)}


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of one run of ``command``, and its output: on a shared machine the CPU
    time is the steadier."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def dry_run_seconds(tree: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one dry run of ``tree``."""
    return timed([str(PYTHON), "launch.py", *DRY_RUN], tree, tree_env(tree))[:2]


def setup_phases(tree: Path, run_dir: Path, warm_start_cache: Path) -> tuple[dict[str, float], list[dict]]:
    """One run of the default to its first step: its ``timing/setup/*`` seconds, and its records less ``timing/*``
    (what a faster set-up must leave as it was)."""
    subprocess.run([str(PYTHON), "launch.py", "experiments/tiny_cpu.py", "trainer.max_steps=1", "--run-dir",
                    str(run_dir)], cwd=tree, env=tree_env(tree, warm_start_cache), check=True, capture_output=True)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    untimed = [{k: v for k, v in r.items() if not k.startswith("timing/")} for r in records]
    phases = {phase: records[0].get(f"timing/setup/{phase}", 0.0) for phase in PHASES}
    phases["other"] = phases["total"] - phases["ray"] - phases["warm_start"] - phases["workers"]
    return phases, untimed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="eb7622a~1", help="git ref of the baseline tree")
    parser.add_argument("--repeats", type=int, default=5, help="dry runs per tree (median; 0: none)")
    parser.add_argument("--runs", type=int, default=2, help="runs of the default per tree (median; 0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="setup_time_") as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.baseline], cwd=ROOT, check=True)
        trees = {f"baseline {args.baseline}": base, "this tree": ROOT}
        try:
            dry = {name: [] for name in trees}
            for tree in trees.values() if args.repeats else ():
                dry_run_seconds(tree)  # untimed: the first touch of the files
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    dry[name].append(dry_run_seconds(tree))
            setup = {name: [] for name in trees}
            for k in range(args.runs):
                for i, (name, tree) in enumerate(trees.items()):
                    setup[name].append(setup_phases(tree, Path(tmp) / f"run-{i}-{k}", Path(tmp) / f"cache-{i}"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    print(f"{'':28s}" + "".join(f"{name:>24s}" for name in trees))
    for i, what in enumerate(("wall", "CPU") if args.repeats else ()):
        cells = "".join(f"{statistics.median(t[i] for t in dry[n]):23.2f}s" for n in trees)
        print(f"{'dry run dsr1_7b ' + what + ' (median)':28s}" + cells)
    for k in range(args.runs):
        for phase in PHASES:
            cells = "".join(f"{setup[n][k][0][phase]:23.1f}s" for n in trees)
            print(f"{f'set-up {phase} (run {k + 1})':28s}" + cells)
    for phase in PHASES if args.runs else ():
        cells = "".join(f"{statistics.median(r[phase] for r, _ in setup[n]):23.1f}s" for n in trees)
        print(f"{'set-up ' + phase + ' (median)':28s}" + cells)
    if args.runs:
        runs = [records for name in trees for _, records in setup[name]]
        same = all(records == runs[0] for records in runs)
        print(f"metrics of every run, less timing/*: {'equal to the bit' if same else 'DIFFER between runs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
