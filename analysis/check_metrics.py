"""Check a run's metrics against nightly thresholds.

    python analysis/check_metrics.py runs/<run>/metrics.jsonl 'data["train/reward"]["40"] > 0.75' \\
        'max(data["train/token_mult_prob_error"]) < 1.05' [--step-needed 40] [--json summary.json]
    python analysis/check_metrics.py aime-metric.json 'data["score"] >= 0.2396'      # a flat score file
    python analysis/check_metrics.py aime-metric.json --score-step 240 'data["score"]["240"] >= 0.2396'

METRICS is a run directory, its metrics.jsonl, a JSON file in the reference layout {"<metric>": {"<step>": v}}, or
a flat score file {"<metric>": v} (one value per metric, no step, as the reference's evaluation jobs write). A flat
file reads as a series of one step, at step 0 or the step --score-step names; where a number is expected, a series
of one step is its value, so data["score"] >= 0.2396 runs as the reference writes it.
Each check is an expression of the language in ppo/metrics/expressions.py (the reference's grammar, never eval'd).

Exit status: 0 every check passed; 1 a check failed (a regression, or a check that reads data the run lacks);
3 INFRA-FAIL, the run did not reach a step the checks need (see ppo/metrics/checks.py), which wins over 1;
2 a bad command line, an invalid check, or an unreadable metrics file, with one line on standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

try:
    import ppo  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppo.metrics.checks import format_table, run_checks
from ppo.metrics.expressions import ExpressionError, parse_check
from ppo.metrics.loader import load_metrics
from ppo.metrics.reader import MetricsFormatError

PROG = "check_metrics.py"
USAGE_ERROR = 2


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the usage block is what --help is for)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("metrics", metavar="METRICS",
                        help="run directory, metrics.jsonl, or reference-layout JSON file")
    parser.add_argument("checks", nargs="+", metavar="EXPR", help="check expression, e.g. 'data[\"m\"][\"40\"] > 0.7'")
    parser.add_argument("--json", metavar="OUT", help="also write a machine-readable summary to OUT")
    parser.add_argument(
        "--step-needed",
        metavar="N",
        type=non_negative_int,
        help="INFRA-FAIL every check unless the run logged step N (for checks such as mean(d) that name no step)",
    )
    parser.add_argument(
        "--score-step",
        metavar="N",
        type=non_negative_int,
        help="the step a flat score file's values are read at (default 0), e.g. the evaluated checkpoint's step",
    )
    return parser


def non_negative_int(text: str) -> int:
    """argparse type for a step number (also used by nightly.py)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    checks = []
    for index, expression in enumerate(args.checks, start=1):
        try:
            checks.append(parse_check(expression))
        except ExpressionError as exc:
            return _fail(f"check {index}: {exc}")
    try:
        data = load_metrics(args.metrics, score_step=args.score_step)
    except MetricsFormatError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot read {args.metrics}: {exc.strerror or exc}")
    report = run_checks(data, checks, step_needed=args.step_needed)
    print(f"metrics: {args.metrics}")
    print(format_table(report))
    if args.json:
        summary = {"metrics": str(args.metrics), **report.to_json()}
        try:
            Path(args.json).write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write {args.json}: {exc.strerror or exc}")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
