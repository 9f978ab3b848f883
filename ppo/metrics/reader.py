"""Reading a metrics log (``metrics.jsonl``) and converting it to the reference layout.

The reference layout, which nightly checks and dashboards consume, is ``{"<metric>": {"<step>": value}}`` with the
step keys as strings, each inner dict ordered by step number.

Two things a live or crashed run leaves behind are tolerated:

- a partial last line (the run was killed mid-write, or the file is read while the run writes): it is skipped with a
  warning. Only the last line gets this leniency; an unreadable line in the middle is corruption and raises.
- repeated steps: a resumed run logs again the steps after its checkpoint. For each (step, metric) pair the last
  record wins. The merge is per metric, not per record, because a step is often logged in several records (training
  metrics, then validation metrics, possibly from another thread) and replacing whole records would drop some.
  A consequence: a metric that only the superseded attempt logged at that step survives.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ppo.metrics.encoding import decode_float

log = logging.getLogger(__name__)

Record = dict[str, Any]
ReferenceLayout = dict[str, dict[str, float]]


class MetricsFormatError(ValueError):
    """A metrics file that cannot be read as a metrics log or as the reference layout."""


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    """All complete records of a ``metrics.jsonl``, in file order, values decoded to floats.

    A metric whose value is ``null`` is left out of its record (some loggers write ``null`` for "not measured").
    """
    path = Path(path)
    return parse_records(path.read_bytes(), source=str(path))


def parse_records(content: bytes | str, *, source: str = "<metrics>") -> list[Record]:
    """:func:`read_records` on the bytes of a file; ``source`` names the file in errors."""
    if isinstance(content, str):
        content = content.encode("utf-8")
    lines = content.split(b"\n")
    records: list[Record] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip(b" \t\r\x00"):
            continue
        is_unterminated_tail = number == len(lines)
        try:
            records.append(_parse_line(raw))
        except (UnicodeDecodeError, json.JSONDecodeError, MetricsFormatError) as exc:
            if is_unterminated_tail:
                log.warning("%s: ignored a truncated last line (%d bytes)", source, len(raw))
                continue
            raise MetricsFormatError(f"{source}:{number}: {_reason(exc)}") from None
    return records


def to_reference_layout(records: Iterable[Mapping[str, Any]]) -> ReferenceLayout:
    """``{"<metric>": {"<step>": value}}`` from records; the last record for a (step, metric) pair wins."""
    by_metric: dict[str, dict[int, float]] = {}
    for record in records:
        step = record["step"]
        for name, value in record.items():
            if name != "step":
                by_metric.setdefault(name, {})[step] = value
    return {name: {str(s): series[s] for s in sorted(series)} for name, series in by_metric.items()}


def read_metrics_log(path: str | os.PathLike[str]) -> ReferenceLayout:
    """A ``metrics.jsonl`` in the reference layout."""
    return to_reference_layout(read_records(path))


def _parse_line(raw: bytes) -> Record:
    obj = json.loads(raw.decode("utf-8"))
    if not isinstance(obj, dict):
        raise MetricsFormatError(f"a record must be a JSON object, got {type(obj).__name__}")
    step = obj.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise MetricsFormatError(f"a record needs a non-negative integer 'step', got {step!r}")
    record: Record = {"step": step}
    for name, value in obj.items():
        if name == "step" or value is None:
            continue
        try:
            record[name] = decode_float(value)
        except ValueError as exc:
            raise MetricsFormatError(f"metric {name!r}: {exc}") from None
    return record


def _reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return "not valid UTF-8"
    return str(exc)
