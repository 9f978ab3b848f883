"""GSM8K from the jsonl files of openai/grade-school-math (one ``{"question", "answer"}`` object a line), or from the
hub dataset ``openai/gsm8k:main:train`` / ``openai/gsm8k:main:test`` (the same columns; see :mod:`ppo.data.hub`).

The ``answer`` field is a worked solution whose last line is ``#### N``; N is the ground truth. It is written with
thousands separators in ~1% of rows (``#### 1,080``), which are stripped so the verifier compares plain numbers.
"""

from __future__ import annotations

from pathlib import Path

from ppo.data.columns import require_columns
from ppo.data.hub import local_dataset_file
from ppo.data.records import DatasetError, Record, read_rows, require

SHARED_GSM8K_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"
"""The full copy beside the checkout (``../shared/data/gsm8k``), on the project's own machines: for tests only."""
BUNDLED_GSM8K_DIR = Path(__file__).resolve().parent / "gsm8k_sample"
"""The sample shipped with the package (the first 2,000 training and 200 test problems, MIT licence): what the CPU
recipe reads, so that a fresh clone runs it; real runs pass the full files' paths."""


GSM8K_COLUMNS = (("question",), ("answer",))


def check_gsm8k_columns(path: str | Path) -> None:
    """Raise :class:`DatasetError` (one line) when the file lacks a column :func:`load_gsm8k` reads."""
    require_columns(local_dataset_file(path), GSM8K_COLUMNS)


def parse_final_answer(answer: str) -> str:
    """The number after the last ``####`` of a GSM8K solution, without thousands separators or surrounding space.

    Raises ``ValueError`` when the marker is missing: a row without a final answer cannot be graded, and silently
    keeping it would train on a reward that is always 0.
    """
    head, marker, tail = answer.rpartition("####")
    if not marker:
        raise ValueError("no '#### <answer>' line")
    final = tail.strip().replace(",", "")
    if not final:
        raise ValueError("empty answer after '####'")
    return final


def load_gsm8k(path: str | Path, *, limit: int | None = None) -> list[Record]:
    """Load a GSM8K file (jsonl, or parquet; a hub id reads its fetched split) as records: ``prompt`` = the question,
    ``ground_truth`` = the normalised final answer.

    ``metadata["solution"]`` keeps the full worked solution (for supervised warm starts and for reading samples).
    ``id`` is ``gsm8k/<file stem>/<row>`` with rows counted from 0 in file order. ``limit`` keeps the first rows
    only, for CPU recipes and quick checks.
    """
    path = local_dataset_file(path)
    records = []
    for row_no, row in enumerate(read_rows(path)):
        if limit is not None and row_no >= limit:
            break
        question = require(row, "question", path, row_no)
        answer = require(row, "answer", path, row_no)
        try:
            ground_truth = parse_final_answer(answer)
        except ValueError as e:
            raise DatasetError(f"{path}: row {row_no}: {e}") from None
        records.append(
            Record(
                prompt=question,
                ground_truth=ground_truth,
                id=f"gsm8k/{path.stem}/{row_no}",
                metadata={"source": "gsm8k", "solution": answer},
            )
        )
    return records
