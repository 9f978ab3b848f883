"""One entry point for analysis scripts: metrics in the reference layout from whatever the user points at.

Accepted: a run directory (its ``metrics.jsonl`` is read), a ``metrics.jsonl`` itself, or a JSON file already in the
reference layout ``{"<metric>": {"<step>": value}}`` (what the reference's nightly jobs write). The two file kinds
are told apart by content, not by name: a file that parses as one JSON object whose values are all objects is the
reference layout; anything else is read as a metrics log (a one-line log is an object too, but its values are
numbers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppo.metrics.encoding import decode_float
from ppo.metrics.reader import MetricsFormatError, ReferenceLayout, parse_records, to_reference_layout
from ppo.metrics.writer import METRICS_FILENAME


def load_metrics(path: str | os.PathLike[str]) -> ReferenceLayout:
    """Metrics in the reference layout, steps in numeric order within each metric.

    Raises ``FileNotFoundError`` (or another ``OSError``) when the file cannot be read and
    :class:`~ppo.metrics.reader.MetricsFormatError` when its content is neither format.
    """
    path = Path(path)
    if path.is_dir():
        candidate = path / METRICS_FILENAME
        if not candidate.is_file():
            raise FileNotFoundError(f"{path} is a directory without a {METRICS_FILENAME}")
        path = candidate
    content = path.read_bytes()
    whole = _try_parse_whole(content)
    if isinstance(whole, dict) and all(isinstance(v, dict) for v in whole.values()):
        return normalize_reference_layout(whole, source=str(path))
    return to_reference_layout(parse_records(content, source=str(path)))


def normalize_reference_layout(obj: Mapping[str, Any], *, source: str = "<metrics>") -> ReferenceLayout:
    """Validate a reference-layout mapping: integer step keys (written canonically, ``"040"`` -> ``"40"``), values
    decoded to floats (``null`` dropped), steps sorted numerically, since JSON object order is not guaranteed to be
    step order."""
    out: ReferenceLayout = {}
    for name, series in obj.items():
        if not isinstance(series, Mapping):
            raise MetricsFormatError(f"{source}: metric {name!r} must map steps to values")
        steps: dict[int, float] = {}
        for key, raw in series.items():
            try:
                step = int(key)
            except (TypeError, ValueError):
                raise MetricsFormatError(f"{source}: metric {name!r} has a non-integer step key {key!r}") from None
            if raw is None:
                continue
            try:
                steps[step] = decode_float(raw)
            except ValueError as exc:
                raise MetricsFormatError(f"{source}: metric {name!r} step {key!r}: {exc}") from None
        out[name] = {str(s): steps[s] for s in sorted(steps)}
    return out


def last_step(data: Mapping[str, Mapping[str, float]]) -> int | None:
    """The largest step any metric was logged at (how far the run got), ``None`` if nothing was logged."""
    return max((int(step) for series in data.values() for step in series), default=None)


def _try_parse_whole(content: bytes) -> Any:
    try:
        return json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
