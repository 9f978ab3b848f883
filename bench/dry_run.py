"""The dry run of a big recipe, a wait a user meets at every ``--dry-run``: ``launch.py experiments/dsr1_7b.py
--executor slurm --dry-run`` (the config's checks, the placement and memory plan, the hub ids looked up in the cache,
the sbatch script), each run a fresh process, as from a shell.

    .venv/bin/python bench/dry_run.py                       # this tree against fcaffb9 (before issue 39 item 3)
    .venv/bin/python bench/dry_run.py --base HEAD~1 --repeats 9
    .venv/bin/python bench/dry_run.py --base none           # this tree and the interpreter's start only

Measured in the same invocation, the commands taking turns (base, this tree, interpreter, base, ...) so that a change
in the machine's load hits each alike:

- **this tree** and, with ``--base REF``, the same dry run in a ``git worktree`` of REF run with this checkout's
  ``.venv`` (``bench/setup_time.py``'s ``tree_env``: its own ``ppo`` first on the path, bytecode cached as in a
  user's shell);
- **the interpreter's start**, ``python -c pass`` with the same ``.venv`` (its ``site`` and the editable install's
  finder included): the floor any command pays, which no change to the project moves.  It is the yardstick for the
  machine's state: on these shared 2 cores it is ~0.03-0.05 s when they are quiet, and when it is several times that
  the other numbers are inflated alike; "own" is the dry run less it.

Each command runs once untimed (the first touch of its files), then ``--repeats`` times; the table gives the median
wall time and the median CPU time (user + system, steadier than wall when other jobs share the cores), and the load
average before and after.  Every run passes ``--run-dir`` of one temporary path (nothing is created), so the two
trees' outputs can be compared whole: a faster dry run must print the same text (the same checks, plan and script).

Numbers are seconds on this machine in this invocation; on a shared machine, hold its lock while this runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from setup_time import DRY_RUN, PYTHON, ROOT, timed, tree_env  # bench/setup_time.py (bench/ is sys.path[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="fcaffb9", help="git ref of the baseline tree ('none': no baseline tree)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each command (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dry_run_") as tmp:
        run_dir = Path(tmp) / "run"
        dry_run = [str(PYTHON), "launch.py", *DRY_RUN, "--run-dir", str(run_dir)]
        commands: dict[str, tuple[list[str], Path, dict[str, str]]] = {}
        base = Path(tmp) / "base"
        if args.base != "none":
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.base], cwd=ROOT, check=True)
            commands[f"dry run, base {args.base}"] = (dry_run, base, tree_env(base))
        commands["dry run, this tree"] = (dry_run, ROOT, tree_env(ROOT))
        commands["interpreter start"] = ([str(PYTHON), "-c", "pass"], ROOT, tree_env(ROOT))
        try:
            load_before = os.getloadavg()[0]
            outputs = {name: timed(*command)[2] for name, command in commands.items()}  # untimed: first touch
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(args.repeats):
                for name, command in commands.items():
                    times[name].append(timed(*command)[:2])
            load_after = os.getloadavg()[0]
        finally:
            if args.base != "none":
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    medians = {name: [statistics.median(t[i] for t in runs) for i in (0, 1)] for name, runs in times.items()}
    floor = medians["interpreter start"]
    print(f"{'':30s}{'wall (median)':>15s}{'CPU (median)':>15s}{'own wall':>11s}{'own CPU':>10s}")
    for name, (wall, cpu) in medians.items():
        own = "" if name == "interpreter start" else f"{wall - floor[0]:10.3f}s{cpu - floor[1]:9.3f}s"
        print(f"{name:30s}{wall:14.3f}s{cpu:14.3f}s{own}")
    print(f"{args.repeats} timed runs each; load average {load_before:.2f} before, {load_after:.2f} after")
    dry_outputs = [text for name, text in outputs.items() if name.startswith("dry run")]
    if len(dry_outputs) == 2:
        same = dry_outputs[0] == dry_outputs[1]
        print(f"dry run output, base and this tree: {'identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
