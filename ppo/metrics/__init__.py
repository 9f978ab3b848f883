"""The run's metrics log and the readers and checks built on it.

- :mod:`~ppo.metrics.writer`: ``MetricsWriter`` appends ``{"step": int, "<metric>": float}`` lines to
  ``<run_dir>/metrics.jsonl``.
- :mod:`~ppo.metrics.reader`: records from a log (a partial last line tolerated) and the reference layout
  ``{"<metric>": {"<step>": value}}``.
- :mod:`~ppo.metrics.loader`: ``load_metrics`` from a run directory, a log, or a reference-layout JSON file.
- :mod:`~ppo.metrics.encoding`: how NaN and infinities are spelled so the files stay strict JSON.
- :mod:`~ppo.metrics.series`: ``min``/``max``/``mean``/``median``/``ratio_above`` over one metric's history.
- :mod:`~ppo.metrics.expressions`: the nightly check language, parsed without ``eval``.
- :mod:`~ppo.metrics.checks`: PASS / FAIL / INFRA-FAIL verdicts for a set of checks.
"""

from __future__ import annotations

from ppo.metrics.checks import CheckReport, CheckResult, Status, format_table, run_checks
from ppo.metrics.expressions import (
    Check,
    CheckError,
    EvaluationError,
    ExpressionError,
    MissingDataError,
    evaluate_check,
    parse_check,
)
from ppo.metrics.loader import last_step, load_metrics
from ppo.metrics.reader import MetricsFormatError, read_metrics_log, read_records, to_reference_layout
from ppo.metrics.writer import METRICS_FILENAME, MetricsWriter

__all__ = [
    "METRICS_FILENAME",
    "Check",
    "CheckError",
    "CheckReport",
    "CheckResult",
    "EvaluationError",
    "ExpressionError",
    "MetricsFormatError",
    "MetricsWriter",
    "MissingDataError",
    "Status",
    "evaluate_check",
    "format_table",
    "last_step",
    "load_metrics",
    "parse_check",
    "read_metrics_log",
    "read_records",
    "run_checks",
    "to_reference_layout",
]
