"""``launch.py SWEEP_FILE``: check a sweep, show it, run it (locally or as a SLURM job array), resume it.

    python launch.py sweeps/X.py [path=value ...] [--executor local|slurm] [--max-parallel N] [--run-dir D]
                     [--dry-run] [--detach] [--poll-s S] [--yes] [--allow-dirty]

``path=value`` overrides apply to every trial (``executor.*`` ones do not change trial ids).  ``--dry-run`` lists
the trials (id, seed, overrides), each one's flattened difference from the common base, the total resources and,
for SLURM, the array's sbatch script; it creates nothing.  Otherwise the sweep directory (default
``runs/sweeps/<name>``) is created or reused, and running the same command again skips finished trials,
resubmits failed ones (they resume from their checkpoints) and follows running ones.  SLURM sweeps need a clean git
tree (or ``--allow-dirty``) and ``--yes`` (or a yes at the prompt), as single SLURM runs do.

Exit status: 0 every trial done or stopped (for ``--detach``: submitted), 1 some trial failed, 2 a bad command line
or sweep (one line on stderr, nothing created).

``launch.py`` sends a command line here when it names a sweep file (:func:`ppo.config.loading.is_sweep_file`).
This CLI builds on the launch layer (:mod:`ppo.launch.prepare`, :mod:`ppo.launch.rundir`, :mod:`ppo.launch.slurm`),
never on ``launch.py``'s own CLI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppo.config.errors import ConfigError

USAGE = ("python launch.py SWEEP_FILE [path=value ...] [--executor local|slurm] [--max-parallel N] [--run-dir D] "
         "[--dry-run] [--detach] [--poll-s S] [--yes] [--allow-dirty]")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ConfigError(f"{message} (usage: {USAGE})")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="launch.py", usage=USAGE, description="Run a hyperparameter sweep.")
    p.add_argument("file", help="sweep file (defines SWEEP = Sweep(...))")
    p.add_argument("overrides", nargs="*", metavar="path=value", help="override applied to every trial")
    p.add_argument("--executor", choices=("local", "slurm"), help="run every trial with this executor")
    p.add_argument("--max-parallel", type=int, metavar="N", help="trials at once (SLURM: the array's %%N)")
    p.add_argument("--run-dir", type=Path, help="the sweep directory (default runs/sweeps/<name>)")
    p.add_argument("--dry-run", action="store_true", help="list trials, differences, resources; create nothing")
    p.add_argument("--detach", action="store_true", help="SLURM: return once the array is submitted")
    p.add_argument("--poll-s", type=float, metavar="S", help="seconds between polls (default: the sweep's poll_s)")
    p.add_argument("--yes", action="store_true", help="submit to SLURM without asking")
    p.add_argument("--allow-dirty", action="store_true", help="submit to SLURM from a tree with uncommitted changes")
    return p


def main(argv: list[str]) -> int:
    """Raises :class:`ConfigError` for ``launch.py`` to print (exit 2)."""
    from ppo.sweep.plan import default_sweep_dir, plan_sweep
    from ppo.sweep.spec import load_sweep

    args = _parser().parse_intermixed_args(argv)
    if args.max_parallel is not None and args.max_parallel < 1:
        raise ConfigError(f"--max-parallel must be >= 1, got {args.max_parallel}")
    if args.poll_s is not None and args.poll_s <= 0:
        raise ConfigError(f"--poll-s must be > 0, got {args.poll_s}")
    loaded = load_sweep(args.file)
    plan = plan_sweep(loaded, args.executor, args.overrides, args.max_parallel, dry_run=args.dry_run)
    sweep_dir = (args.run_dir or default_sweep_dir(loaded.name)).absolute()
    if args.dry_run:
        from ppo.sweep.dryrun import dry_run_text

        sys.stdout.write(dry_run_text(plan, sweep_dir, _sbatch(plan, sweep_dir)))
        return 0
    if args.detach and not plan.is_slurm:
        raise ConfigError("--detach is for SLURM sweeps (local trials are children of this process)")
    git = _check_slurm(plan, args) if plan.is_slurm else None
    if plan.is_slurm and git is None:
        print("not submitted")
        return 0
    from ppo.sweep.runner import SweepRunner

    print(f"sweep directory: {sweep_dir}", flush=True)
    return SweepRunner(plan, sweep_dir, poll_s=args.poll_s, detach=args.detach, git=git).run()


def _sbatch(plan, sweep_dir: Path) -> str | None:
    search = plan.loaded.spec.search
    if not plan.is_slurm or not (plan.trials or search):
        return None
    from ppo.sweep.slurm import FOLDER, array_sbatch

    first = plan.trials[0].prepared if plan.trials else plan.base  # a search's elements: the base's settings
    count = len(plan.trials) or search.n_trials
    return array_sbatch(first.executor, plan.loaded.name, sweep_dir / FOLDER, count, plan.max_parallel)


def _check_slurm(plan, args: argparse.Namespace):
    """The git state to record, after the same checks as a single SLURM run; None when the user said no."""
    from ppo.launch.slurm import check_submission
    from ppo.sweep.dryrun import resources_text

    what = resources_text(plan)[-1] if plan.loaded.spec.budget is None else resources_text(plan)[-2]
    return check_submission(
        allow_dirty=args.allow_dirty, yes=args.yes, shown_by_dry_run="the sweep",
        diff_saved_in="every trial's run directory", subject=f"the sweep ({len(plan.trials)} trials)",
        question=f"{what}\nsubmit sweep '{plan.loaded.name}'? [y/N] ")
