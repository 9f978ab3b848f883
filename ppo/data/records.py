"""The record every dataset produces, the dataset error, and reading rows from jsonl / json / parquet files.

Every dataset (GSM8K, DAPO-Math, AIME, the synthetic arithmetic task) is reduced to the same small record so the
rest of the pipeline — prompt templates, the loader, the math verifier — never needs to know where a problem came
from. Anything source-specific rides along in ``metadata``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """A dataset file is missing, unreadable or not in the expected schema.

    Its message is one line naming the file (and the row where there is one), so a launcher can print it as is
    instead of a traceback.
    """


@dataclass(frozen=True)
class Record:
    """One problem: the text the policy is asked about and the answer the verifier grades against.

    ``prompt`` is the problem as the source states it (no template applied: templates belong to the experiment, not
    the dataset). ``ground_truth`` is the answer as a string in the form ``ppo.envs.math.verify`` compares against.
    ``id`` is stable across runs (source, split and row) so logged samples can be traced back to the file.
    """

    prompt: str
    ground_truth: str
    id: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _to_python(value: Any) -> Any:
    """Turn what pandas/pyarrow hand back (numpy arrays for list columns, numpy scalars) into plain Python.

    numpy is not imported here: a value can be numpy's only once pandas or pyarrow has loaded it, and the dry run,
    which imports this module, spends no ~0.1 s on it."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return [_to_python(v) for v in value.tolist()]
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_python(v) for v in value]
    return value


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def _read_json(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise DatasetError(f"{path}: expected a JSON list of objects")
    return data


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except ImportError as e:
        raise DatasetError(
            f"{path}: reading parquet needs pyarrow (pip install pyarrow), or convert to jsonl ({e})"
        ) from None
    except Exception as e:  # noqa: BLE001 - pyarrow raises several unrelated types for a corrupt file
        raise DatasetError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
    return [_to_python(row) for row in frame.to_dict(orient="records")]


_READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".parquet": _read_parquet}


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read a dataset file into a list of plain dicts, choosing the format from the suffix.

    Public releases ship as parquet (DAPO-Math-17k, AIME) or jsonl (GSM8K); both come back as plain Python values
    (parquet's list columns become lists, not numpy arrays) so the dataset parsers handle one shape.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise DatasetError(f"{path}: unsupported dataset format {path.suffix!r} (expected .jsonl, .json or .parquet)")
    return reader(path)


def require(row: dict[str, Any], key: str, path: str | Path, row_no: int) -> Any:
    """``row[key]``, or a :class:`DatasetError` that names the file, the row and the columns that are there."""
    try:
        return row[key]
    except KeyError:
        raise DatasetError(
            f"{path}: row {row_no} has no {key!r} field (fields: {', '.join(sorted(map(str, row)))})"
        ) from None
