from __future__ import annotations

import json
from pathlib import Path

import pytest


def has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


TABLE_SUFFIXES = [".jsonl", pytest.param(".parquet", marks=pytest.mark.skipif(not has_pyarrow(), reason="no pyarrow"))]
"""Formats a schema test runs in: jsonl always, parquet where pyarrow is installed."""


def write_table(path: Path, rows: list[dict]) -> Path:
    """Write rows as parquet when the suffix asks for it (through pandas and pyarrow), else as jsonl."""
    if path.suffix == ".parquet":
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path
