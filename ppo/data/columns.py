"""A data file's columns, read without loading its rows, and the one-line error for a column it lacks.

The launcher checks every dataset a run reads against its loader's schema before anything starts (a column missing
from DAPO-Math's 1.8M rows would otherwise surface when the trainer loads them, on the cluster): parquet from the
file's schema alone, jsonl from the first object, json from the first element.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ppo.data.records import DatasetError


def columns(path: str | Path) -> list[str]:
    """The column names of a ``.parquet``, ``.jsonl`` or ``.json`` data file."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        if suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                first = next((line for line in f if line.strip()), "{}")
            row = json.loads(first)
        elif suffix == ".json":
            rows = json.loads(path.read_text(encoding="utf-8"))
            row = rows[0] if isinstance(rows, list) and rows else {}
        else:
            raise DatasetError(f"{path}: unsupported dataset format {path.suffix!r} (expected .jsonl, .json or "
                               ".parquet)")
    except DatasetError:
        raise
    except Exception as err:  # noqa: BLE001 - pyarrow and json raise several unrelated types for a corrupt file
        raise DatasetError(f"{path}: not a readable {suffix[1:]} file ({type(err).__name__}: {err})") from None
    if not isinstance(row, dict):
        raise DatasetError(f"{path}: expected JSON objects, got {type(row).__name__}")
    return list(row)


def require_columns(path: str | Path, required: Sequence[tuple[str, ...]], *, fold_case: bool = False,
                    names: Sequence[str] | None = None) -> None:
    """Raise :class:`DatasetError` naming the first entry of ``required`` (a tuple of alternatives: any one will do)
    that the file lacks.  ``fold_case``: compare names case-insensitively.  ``names``: the columns, if already read."""
    present = list(columns(path) if names is None else names)
    have = {n.lower() for n in present} if fold_case else set(present)
    for alternatives in required:
        if not any((a.lower() if fold_case else a) in have for a in alternatives):
            wanted = " or ".join(repr(a) for a in alternatives)
            raise DatasetError(f"{path} has no column {wanted} (columns: {', '.join(present) or 'none'})")
