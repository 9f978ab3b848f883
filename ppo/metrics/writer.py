"""The writer of a run's metrics log, ``<run_dir>/metrics.jsonl``.

One JSON object per line, ``{"step": int, "<metric name>": float, ...}``, flushed after every line so that a run
killed at any moment leaves every completed step on disk (``fsync=True`` also survives a machine crash, at the cost
of a disk round trip per step). Non-finite values are spelled as in :mod:`ppo.metrics.encoding`.

Opening an existing log appends to it, which is how a resumed run continues its history. Steps it logs again are
resolved by the reader (the last record for a step and metric wins), so the writer never rewrites old lines, with
one exception: a crash in the middle of a write can leave a partial last line. Appending after it would glue the
next record onto the fragment and lose both, so the fragment (which holds no complete record) is cut off first.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppo.metrics.encoding import encode_float

METRICS_FILENAME = "metrics.jsonl"


class MetricsWriter:
    """Appends one line per :meth:`log` call to ``<run_dir>/metrics.jsonl``; usable as a context manager.

    Thread-safe, because validation or timing metrics are sometimes logged from a helper thread.
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(run_dir) / METRICS_FILENAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._lock = threading.Lock()
        _cut_partial_last_line(self.path)
        self._file = open(self.path, "a", encoding="utf-8", newline="\n")

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Write ``{"step": step, **metrics}`` as one line and flush it.

        Values may be anything ``float()`` accepts except strings (Python and NumPy numbers, 0-d tensors); a value
        that cannot be converted raises before anything is written, so a bad call never leaves half a record.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative int, got {step!r}")
        record: dict[str, int | float | str] = {"step": step}
        for name, value in metrics.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"metric names must be non-empty strings, got {name!r}")
            if name == "step":
                raise ValueError("'step' is reserved for the step number and cannot be a metric name")
            record[name] = encode_float(_to_float(name, value))
        line = json.dumps(record, allow_nan=False, ensure_ascii=False) + "\n"
        with self._lock:
            if self._file.closed:
                raise ValueError(f"{self.path} is closed")
            self._file.write(line)
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _to_float(name: str, value: Any) -> float:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"metric {name!r} must be a number, got the string {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"metric {name!r} must be a number, got {type(value).__name__}: {exc}") from None


def _cut_partial_last_line(path: Path, chunk: int = 1 << 16) -> None:
    """Truncate ``path`` just after its last newline, if anything follows it (the remains of an interrupted write)."""
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return
    with f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return
        f.seek(end - 1)
        if f.read(1) == b"\n":
            return
        pos = end
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            newline = f.read(pos - start).rfind(b"\n")
            if newline >= 0:
                f.truncate(start + newline + 1)
                return
            pos = start
        f.truncate(0)
