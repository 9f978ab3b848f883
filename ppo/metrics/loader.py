"""One entry point for analysis scripts: metrics in the reference layout from whatever the user points at.

Accepted: a run directory (its ``metrics.jsonl`` is read), a ``metrics.jsonl`` itself, a JSON file already in the
reference layout ``{"<metric>": {"<step>": value}}`` (what the reference's nightly jobs write), or a flat score file
``{"<metric>": value}`` (what the reference's evaluation jobs write, e.g. ``{"score": 0.2604}``: one value per
metric, no step). The file kinds are told apart by content, not by name: a file that parses as one JSON object whose
values are all objects is the reference layout; one whose values are all numbers (or ``null``, or the strings of
:mod:`ppo.metrics.encoding`) and that has no ``"step"`` is a flat score file; anything else is read as a metrics log
(a one-line log is an object of numbers too, but it has a ``"step"``).

A flat score file reads as a one-step series per metric, at step ``score_step`` (default 0): ``data["score"]`` is
then a number in a check (see :mod:`ppo.metrics.expressions`), and ``data["score"]["<score_step>"]`` names the step
explicitly, e.g. the training step of the checkpoint that was evaluated.
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


def load_metrics(path: str | os.PathLike[str], *, score_step: int | None = None) -> ReferenceLayout:
    """Metrics in the reference layout, steps in numeric order within each metric.

    ``score_step`` is the step a flat score file's values are placed at (``None``: step 0); giving it for any other
    kind of file is a :class:`~ppo.metrics.reader.MetricsFormatError`, since it would be silently ignored.

    Raises ``FileNotFoundError`` (or another ``OSError``) when the file cannot be read and
    :class:`~ppo.metrics.reader.MetricsFormatError` when its content is in none of the formats.
    """
    path = Path(path)
    if path.is_dir():
        candidate = path / METRICS_FILENAME
        if not candidate.is_file():
            raise FileNotFoundError(f"{path} is a directory without a {METRICS_FILENAME}")
        path = candidate
    content = path.read_bytes()
    whole = _try_parse_whole(content)
    if is_flat_scores(whole):
        step = 0 if score_step is None else score_step
        return normalize_reference_layout({name: {str(step): value} for name, value in whole.items()}, source=str(path))
    if score_step is not None:
        raise MetricsFormatError(f"{path}: a score step is only for a flat score file {{\"<metric>\": value}}")
    if isinstance(whole, dict) and all(isinstance(v, dict) for v in whole.values()):
        return normalize_reference_layout(whole, source=str(path))
    return to_reference_layout(parse_records(content, source=str(path)))


def is_flat_scores(obj: Any) -> bool:
    """Whether a parsed JSON document is a flat score file: a non-empty object of scalars with no ``"step"``."""
    return (
        isinstance(obj, dict) and bool(obj) and "step" not in obj
        and all(v is None or isinstance(v, (int, float, str)) for v in obj.values())
    )


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
