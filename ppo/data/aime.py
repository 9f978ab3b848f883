"""AIME 2024 (30 problems, integer answers 0–999) from a local parquet, jsonl or json file, or a hub dataset
(``BytedTsinghua-SIA/AIME-2024:train``, ``HuggingFaceH4/aime_2024:train``; see :mod:`ppo.data.hub`).

Three public layouts are accepted, told apart by their columns:

- Maxwell-Jia/AIME_2024: ``ID`` ("2024-I-1"), ``Problem``, ``Solution``, ``Answer`` (an integer);
- HuggingFaceH4/aime_2024: the same fields in lower case (``id``, ``problem``, ``solution``, ``answer``, plus ``url``,
  ``year``) — column names are matched case-insensitively, so both load through one path;
- BytedTsinghua-SIA/AIME-2024 (DAPO's validation export): the verl RL schema of :mod:`ppo.data.dapo`, where each
  problem is repeated (32 times) for avg@32; ``dedupe=True`` folds the repeats — sample ``n`` responses per prompt
  at evaluation instead.

The prompt is the bare problem statement except in DAPO's export, whose prompt already carries DAPO's instruction
wrapper; use ``ppo.data.prompts.DAPO_MATH_TEMPLATE`` to give bare problems the same wrapper a DAPO-trained policy saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppo.data.columns import columns, require_columns
from ppo.data.dapo import DAPO_COLUMNS, dedupe_records, parse_dapo_row
from ppo.data.hub import local_dataset_file
from ppo.data.records import DatasetError, Record, read_rows

PLAIN_COLUMNS = (("problem",), ("answer",))
"""The columns of the plain layouts, in any case (``Problem``/``problem``)."""


def _is_dapo_layout(names) -> bool:
    return "prompt" in names and ("reward_model" in names or "data_source" in names)


def check_aime2024_columns(path: str | Path) -> None:
    """Raise :class:`DatasetError` (one line) when the file lacks a column of its layout (DAPO's export when it has
    ``prompt`` and ``reward_model`` or ``data_source``, else the plain one)."""
    file = local_dataset_file(path)
    names = columns(file)
    if _is_dapo_layout(names):
        require_columns(file, DAPO_COLUMNS, names=names)
    else:
        require_columns(file, PLAIN_COLUMNS, fold_case=True, names=names)


def normalise_integer_answer(answer: Any) -> str:
    """``"033"``, ``33`` and ``" 33 "`` all become ``"33"``; anything not an integer is only stripped."""
    text = str(answer).strip()
    try:
        return str(int(text))
    except ValueError:
        return text


def _parse_plain_row(row: dict[str, Any], *, row_no: int, path: Path) -> Record:
    fields = {str(k).lower(): v for k, v in row.items()}
    missing = [k for k in ("problem", "answer") if fields.get(k) is None]
    if missing:
        raise DatasetError(
            f"{path}: row {row_no} has no {' or '.join(repr(k) for k in missing)} field "
            f"(fields: {', '.join(sorted(map(str, row)))}; expected ID/Problem/Solution/Answer in any case, "
            f"or the DAPO schema with 'prompt' and 'reward_model')"
        )
    problem_id = str(fields.get("id", row_no))
    metadata: dict[str, Any] = {"source": "aime2024", "problem_id": problem_id}
    if fields.get("solution") is not None:
        metadata["solution"] = fields["solution"]
    return Record(
        prompt=str(fields["problem"]).strip(),
        ground_truth=normalise_integer_answer(fields["answer"]),
        id=f"aime2024/{problem_id}",
        metadata=metadata,
    )


def load_aime2024(path: str | Path, *, dedupe: bool = True) -> list[Record]:
    """Load AIME 2024 as records (``id`` is ``aime2024/<ID>`` for the plain layouts, ``aime2024/<row>`` for DAPO's)."""
    path = local_dataset_file(path)
    rows = read_rows(path)
    records = []
    for row_no, row in enumerate(rows):
        if _is_dapo_layout(row):
            record = parse_dapo_row(row, id_prefix="aime2024", row_no=row_no, path=path)
            record = Record(record.prompt, normalise_integer_answer(record.ground_truth), record.id, record.metadata)
        else:
            record = _parse_plain_row(row, row_no=row_no, path=path)
        records.append(record)
    return dedupe_records(records, name=str(path)) if dedupe else records
