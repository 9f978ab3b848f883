"""Nightly regression runs: launch a suite, judge each run with its recipe's NIGHTLY checks, append the history.

    python analysis/nightly.py run nightly_suite.py --history nightly/ [--executor local|slurm] [--night 2025-06-01]
    python analysis/nightly.py baseline tiny_cpu --suite nightly_suite.py --seeds 5 --history nightly/
    python analysis/nightly.py baseline experiments/tiny_cpu.py --seeds 5 --history nightly/ \\
        --override trainer.max_steps=100
    python analysis/nightly.py record runs/<run> --recipe tiny_cpu --history nightly/ [--night 2025-06-01]
    python analysis/dashboard.py nightly/ --out dashboard.html

run       For each suite entry (ppo/nightly/suite.py documents the file), runs
          `<launcher> EXPERIMENT OVERRIDES... --executor E --yes --run-dir RUNS/<night>/<recipe>` and waits for it
          (a SLURM job: `<launcher> status RUN_DIR --wait` after the submission; ppo/nightly/runner.py),
          evaluates the checks (ppo/metrics/expressions.py) on the run's metrics.jsonl, and writes
          HISTORY/nights/<night>/<recipe>.json (format: ppo/nightly/history.py). A launch that fails, times out, or
          stops before the checks' step is INFRA-FAIL, never FAIL. The suite is checked before anything starts.
baseline  Runs one recipe with seed=0..N-1 and stores the per-step mean/std/min/max of the key metrics as
          HISTORY/baselines/<recipe>.json. RECIPE is an entry name of --suite, or an experiment file.
record    Makes a record from a run directory that already exists (a night run by hand, a recorded night).
          Checks: --check/--step if given, else --experiment's NIGHTLY, else experiments/<recipe>.py's if that file
          exists, else none (the record is then PASS if the log has records, INFRA-FAIL if not).

--launcher replaces `python launch.py` (shell-quoted: --launcher "python tests/nightly/fake_launch.py"); run from
the repository root. Launcher logs go to RUNS/<night>/<recipe>.stdout.log / .stderr.log.

A nightly job on a cluster, from a clean checkout (SLURM submissions refuse a dirty tree); nightly_suite_gpu.py lists
the GPU recipes, and docs/nightly.md schedules it with scrontab or cron:

    cd $CHECKOUT && git pull -q
    .venv/bin/python analysis/nightly.py run nightly_suite_gpu.py --history $SHARED/nightly --executor slurm
    .venv/bin/python analysis/dashboard.py $SHARED/nightly --out $SHARED/nightly/dashboard.html   # whatever the exit

Triage: an INFRA-FAIL names its cause in the record's "reason" (the launcher's last stderr line, the step reached,
or the timeout); the full output is in the .stderr.log / .stdout.log beside the run directory. A FAIL that follows a
PASS is a regression: the dashboard lists the commits in between and the flattened-config diff. After an intended
change of behaviour, rerun `baseline` so tonight's curves are compared with the new band.

Exit status: run and record: 0 all PASS, 1 a FAIL, 3 an INFRA-FAIL (wins over 1, as in check_metrics.py);
baseline: 0 every seed used, 1 some seeds failed (the band uses the rest), 3 no seed usable (nothing written);
2 a bad command line, suite or experiment, with one line on standard error.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import NoReturn

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from check_metrics import non_negative_int  # noqa: E402 - the sibling script (analysis/ is on sys.path)

from ppo.metrics.expressions import ExpressionError, parse_check  # noqa: E402
from ppo.nightly.baseline import run_baseline  # noqa: E402
from ppo.nightly.history import HistoryError, check_name  # noqa: E402
from ppo.nightly.runner import (  # noqa: E402
    EXECUTORS,
    EXIT_CODES,
    NightOptions,
    parse_launcher,
    record_run_dir,
    run_suite,
    worst_status,
)
from ppo.nightly.suite import Nightly, SuiteError, load_suite, parse_entry, read_nightly  # noqa: E402

PROG = "nightly.py"
USAGE_ERROR = 2


class UsageError(Exception):
    """A command line that cannot be run; the message is one line."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)

    def launching(p: argparse.ArgumentParser) -> None:
        p.add_argument("--history", required=True, type=Path, help="history directory (created if missing)")
        p.add_argument("--executor", choices=EXECUTORS, default="local")
        p.add_argument("--launcher", help='launch command, shell-quoted (default: "python launch.py")')
        p.add_argument("--runs-dir", type=Path, default=Path("runs/nightly"), help="where run directories go")

    run = sub.add_parser("run", help="run a suite and append tonight's records")
    run.add_argument("suite", type=Path, metavar="SUITE", help="suite file, .py (SUITE = [...]) or .json")
    launching(run)
    run.add_argument("--night", help="night label (default: today's UTC date, YYYY-MM-DD)")
    run.add_argument("--only", action="append", metavar="RECIPE", help="run only this entry (repeatable)")

    base = sub.add_parser("baseline", help="run a recipe with N seeds and store its band")
    base.add_argument("recipe", metavar="RECIPE", help="an entry name of --suite, or an experiment file")
    base.add_argument("--seeds", type=_positive_int, required=True, metavar="N")
    launching(base)
    base.add_argument("--suite", type=Path, help="suite file that defines RECIPE")
    base.add_argument("--name", help="recipe name when RECIPE is an experiment file (default: its stem)")
    base.add_argument("--override", action="append", default=[], metavar="PATH=VALUE",
                      help="extra override when RECIPE is an experiment file (repeatable)")
    base.add_argument("--first-seed", type=int, default=0)

    rec = sub.add_parser("record", help="add a record for an existing run directory")
    rec.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    rec.add_argument("--recipe", required=True)
    rec.add_argument("--history", required=True, type=Path)
    rec.add_argument("--night", help="night label (default: the UTC date metrics.jsonl was last written)")
    rec.add_argument("--experiment", type=Path, help="experiment file whose NIGHTLY checks to apply")
    rec.add_argument("--check", action="append", metavar="EXPR", help="a check expression (repeatable)")
    rec.add_argument("--step", type=non_negative_int, help="the step the checks need")
    rec.add_argument("--commit", help="git commit of the run, when RUN_DIR/git.json lacks it")
    rec.add_argument("--wandb-url")
    rec.add_argument("--wall-time", type=float, metavar="SECONDS")
    return parser


def _positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def _options(args: argparse.Namespace, night: str | None = None) -> NightOptions:
    try:
        launcher = parse_launcher(args.launcher)
    except ValueError as exc:
        raise UsageError(f"--launcher: {exc}") from None
    options = NightOptions(
        history=args.history, runs_dir=args.runs_dir, executor=args.executor,
        launcher=launcher, log=lambda line: print(line, flush=True),
    )
    if night:
        options.night = check_name("night", night)
    return options


def cmd_run(args: argparse.Namespace) -> int:
    entries = load_suite(args.suite)
    if args.only:
        names = [e.name for e in entries]
        for name in args.only:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; entries: {', '.join(names)}"
                return _fail(f"--only {name!r} is not in {args.suite}{hint}")
        entries = [e for e in entries if e.name in args.only]
    options = _options(args, args.night)
    records = run_suite(entries, options)
    counts = {s: sum(r.status == s for r in records) for s in EXIT_CODES}
    print(f"[nightly] {options.night}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n), flush=True)
    return EXIT_CODES[worst_status([r.status for r in records])]


def cmd_baseline(args: argparse.Namespace) -> int:
    if args.suite is not None:
        entries = load_suite(args.suite)
        names = [e.name for e in entries]
        if args.recipe not in names:
            close = difflib.get_close_matches(args.recipe, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; entries: {', '.join(names)}"
            return _fail(f"{args.recipe!r} is not an entry of {args.suite}{hint}")
        entry = entries[names.index(args.recipe)]
    else:
        if not Path(args.recipe).is_file():
            return _fail(f"{args.recipe!r} is not an experiment file (give --suite to name a suite entry)")
        item = {"experiment": args.recipe, "overrides": args.override}
        if args.name:
            item["name"] = args.name
        entry = parse_entry(item, where=args.recipe)
    baseline = run_baseline(entry, args.seeds, _options(args), first_seed=args.first_seed)
    used = sum(bool(r["used"]) for r in baseline.runs)
    if used == 0:
        print(f"[baseline] {entry.name}: no seed finished; no baseline written", file=sys.stderr)
        return 3
    return 0 if used == len(baseline.runs) else 1


def cmd_record(args: argparse.Namespace) -> int:
    if not args.run_dir.is_dir():
        return _fail(f"no such run directory: {args.run_dir}")
    experiment = args.experiment
    if args.check or args.step is not None:
        for index, check in enumerate(args.check or [], start=1):
            try:
                parse_check(check)
            except ExpressionError as exc:
                return _fail(f"check {index}: {exc}")
        nightly = Nightly(args.step, tuple(args.check or ()))
    else:
        if experiment is None and (Path("experiments") / f"{args.recipe}.py").is_file():
            experiment = Path("experiments") / f"{args.recipe}.py"
        nightly = read_nightly(experiment) if experiment is not None else Nightly(None, ())
    record = record_run_dir(
        args.run_dir, recipe=args.recipe, night=args.night and check_name("night", args.night), nightly=nightly,
        history=args.history, experiment=str(experiment) if experiment else None, git_commit=args.commit,
        wandb_url=args.wandb_url, wall_time_s=args.wall_time,
    )
    reason = f" ({record.reason})" if record.reason else ""
    print(f"[nightly] {record.recipe} {record.night}: {record.status}{reason}")
    return EXIT_CODES[record.status]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {"run": cmd_run, "baseline": cmd_baseline, "record": cmd_record}[args.command]
    try:
        return handler(args)
    except (SuiteError, HistoryError, UsageError) as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    sys.exit(main())
