"""Running nightly checks against a run's metrics, with three outcomes instead of two.

A nightly job can fail because the model regressed or because the run never got where the checks look (a node
died at step 12, the queue killed it, the log is empty). Those call for different people, so a check is:

- ``PASS``: it evaluated to true;
- ``FAIL``: it evaluated to false, or it could not be evaluated on data the run did produce (a metric that was
  never logged, a step skipped, a division by zero): a regression or a wrong check;
- ``INFRA-FAIL``: the run did not reach a step the check needs, so it was not evaluated. "Needs" is the largest
  step the check reads literally (``data[m]["40"]``), or ``step_needed`` when the caller names one (checks on
  ``mean(d)`` and friends read no step literally). How far the run got is the largest step any metric was logged
  at, so a metric logged every step and one logged every ten are judged against the same horizon.

The verdict of a set of checks is the worst outcome, with ``INFRA-FAIL`` above ``FAIL``: a run that stopped early
has no trustworthy metrics to regress. Exit codes: 0 pass, 1 fail, 3 infra-fail (2 is the CLI's usage error).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ppo.metrics.encoding import encode_float, format_value
from ppo.metrics.expressions import Check, EvaluationError, parse_check
from ppo.metrics.loader import last_step as find_last_step


class Status(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    INFRA_FAIL = "INFRA-FAIL"


EXIT_CODES = {Status.PASS: 0, Status.FAIL: 1, Status.INFRA_FAIL: 3}
_SEVERITY = {Status.PASS: 0, Status.FAIL: 1, Status.INFRA_FAIL: 2}


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    value: float | tuple[float, ...] | None
    message: str


@dataclass(frozen=True)
class CheckReport:
    results: tuple[CheckResult, ...]
    last_step: int | None
    step_needed: int | None

    @property
    def verdict(self) -> Status:
        return max((r.status for r in self.results), key=_SEVERITY.__getitem__, default=Status.PASS)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def counts(self) -> dict[str, int]:
        return {status.value: sum(r.status is status for r in self.results) for status in Status}

    def to_json(self) -> dict[str, Any]:
        """A strict-JSON-ready summary (non-finite values as the strings of :mod:`ppo.metrics.encoding`)."""
        return {
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "last_step": self.last_step,
            "step_needed": self.step_needed,
            "counts": self.counts(),
            "checks": [
                {"check": r.check, "status": r.status.value, "value": _json_value(r.value), "message": r.message}
                for r in self.results
            ],
        }


def run_checks(
    data: Mapping[str, Mapping[str, float]],
    checks: Iterable[str | Check],
    *,
    step_needed: int | None = None,
) -> CheckReport:
    """Evaluate each check on reference-layout ``data``. Strings are parsed here, so an invalid one raises
    :class:`~ppo.metrics.expressions.ExpressionError`; parse them first to report such errors differently."""
    parsed = [c if isinstance(c, Check) else parse_check(c) for c in checks]
    last = find_last_step(data)
    results = tuple(_run_one(check, data, last, step_needed) for check in parsed)
    return CheckReport(results, last, step_needed)


def _run_one(
    check: Check, data: Mapping[str, Mapping[str, float]], last: int | None, step_needed: int | None
) -> CheckResult:
    if last is None:
        return CheckResult(check.source, Status.INFRA_FAIL, None, "the metrics log has no records")
    if step_needed is not None and last < step_needed:
        message = f"the run stopped at step {last}; the checks need step {step_needed}"
        return CheckResult(check.source, Status.INFRA_FAIL, None, message)
    unreached = [p for p in check.points if int(p.step) > last]
    if unreached:
        point = max(unreached, key=lambda p: int(p.step))
        message = f"metric {point.metric!r} has no step {point.step!r} (the run stopped at step {last})"
        return CheckResult(check.source, Status.INFRA_FAIL, None, message)
    try:
        outcome = check.evaluate(data)
    except EvaluationError as exc:
        return CheckResult(check.source, Status.FAIL, None, str(exc))
    status = Status.PASS if outcome.passed else Status.FAIL
    return CheckResult(check.source, status, outcome.value, outcome.message)


def format_table(report: CheckReport) -> str:
    """The report as an aligned plain-text table (status, check, value, message) followed by a verdict line."""
    header = ("STATUS", "CHECK", "VALUE", "MESSAGE")
    rows = [header] + [(r.status.value, r.check, format_value(r.value), r.message) for r in report.results]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths)), row[3]]).rstrip() for row in rows]
    counts = report.counts()
    summary = ", ".join(f"{n} {status.lower()}" for status, n in counts.items() if n)
    reached = "no steps" if report.last_step is None else f"last step {report.last_step}"
    lines.append(f"verdict: {report.verdict.value} ({summary or 'no checks'}; {reached})")
    return "\n".join(lines)


def _json_value(value: float | tuple[float, ...] | None) -> Any:
    if value is None:
        return None
    if isinstance(value, tuple):
        return [encode_float(v) for v in value]
    return encode_float(float(value))
