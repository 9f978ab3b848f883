"""DAPO-Math-17k from a local parquet or jsonl file, or the hub dataset ``BytedTsinghua-SIA/DAPO-Math-17k:train``
(see :mod:`ppo.data.hub`), in the schema of its public release.

The release (BytedTsinghua-SIA/DAPO-Math-17k) is in the verl "RL dataset" schema, one problem a row::

    data_source   "math_dapo"
    prompt        [{"role": "user", "content": "Solve the following math problem step by step. ... Answer: ..."}]
    ability       "MATH"
    reward_model  {"ground_truth": "34", "style": "rule-lean"}
    extra_info    {"index": "<uuid>"}

The user message already carries DAPO's instruction wrapper ("... The last line of your response should be of the
form Answer: $Answer ..."), so it is kept as the record's prompt unchanged: the policy is trained on exactly the
released text. Two variants are accepted as well, because re-exports of the set use them:

- ``prompt`` as a plain string instead of a message list (e.g. open-r1/DAPO-Math-17k-Processed);
- the answer in a top-level ``solution`` or ``answer`` column when ``reward_model`` is absent.

``reward_model`` / ``extra_info`` written as JSON strings (what some jsonl exports do) are decoded.

The original release repeats its problems (by its commonly reported size, ~1.79M rows for ~17.9k distinct
prompts), so one pass over the raw file would show every problem ~100 times and an "epoch" would mean nothing;
``dedupe=True`` (the default) keeps the first row of each distinct (prompt, ground truth) and logs how many repeats
it dropped.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ppo.data.columns import require_columns
from ppo.data.hub import local_dataset_file
from ppo.data.records import DatasetError, Record, read_rows

logger = logging.getLogger(__name__)


DAPO_COLUMNS = (("prompt",), ("reward_model", "solution", "answer"))
"""The columns every row needs: the prompt, and the answer in one of the places :func:`parse_dapo_row` looks."""


def check_dapo_math_columns(path: str | Path) -> None:
    """Raise :class:`DatasetError` (one line) when the file lacks a column :func:`load_dapo_math` reads."""
    require_columns(local_dataset_file(path), DAPO_COLUMNS)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _user_content(prompt: Any, where: str) -> tuple[str, list[dict[str, str]] | None]:
    """The user message's text, and the whole message list when the prompt is one (kept in metadata)."""
    if isinstance(prompt, str):
        return prompt, None
    if isinstance(prompt, list) and all(isinstance(m, dict) and "content" in m for m in prompt):
        user = [m for m in prompt if m.get("role", "user") == "user"]
        if user:
            return str(user[-1]["content"]), [{"role": m.get("role", "user"), "content": m["content"]} for m in prompt]
    raise DatasetError(f"{where}: 'prompt' is neither a string nor a list of chat messages with a user message")


def _ground_truth(row: dict[str, Any], where: str) -> tuple[str, str | None]:
    reward_model = _maybe_json(row.get("reward_model"))
    if isinstance(reward_model, dict) and "ground_truth" in reward_model:
        return str(reward_model["ground_truth"]).strip(), reward_model.get("style")
    for key in ("solution", "answer"):
        if row.get(key) is not None:
            return str(row[key]).strip(), None
    raise DatasetError(f"{where}: no answer (expected reward_model.ground_truth, or a 'solution' or 'answer' column)")


def parse_dapo_row(row: dict[str, Any], *, id_prefix: str, row_no: int, path: str | Path) -> Record:
    """One row of the verl RL schema (DAPO-Math-17k, and DAPO's AIME-2024 export) as a record."""
    where = f"{path}: row {row_no}"
    if "prompt" not in row:
        raise DatasetError(f"{where} has no 'prompt' field (fields: {', '.join(sorted(map(str, row)))})")
    prompt, messages = _user_content(row["prompt"], where)
    ground_truth, style = _ground_truth(row, where)
    extra_info = _maybe_json(row.get("extra_info"))
    metadata: dict[str, Any] = {"source": row.get("data_source", id_prefix)}
    if row.get("ability") is not None:
        metadata["ability"] = row["ability"]
    if style is not None:
        metadata["reward_style"] = style
    if extra_info is not None:
        metadata["extra_info"] = extra_info
    if messages is not None and len(messages) > 1:
        metadata["messages"] = messages
    return Record(prompt=prompt, ground_truth=ground_truth, id=f"{id_prefix}/{row_no}", metadata=metadata)


def dedupe_records(records: list[Record], *, name: str) -> list[Record]:
    """Keep the first record of each distinct (prompt, ground truth), logging how many repeats were dropped."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for record in records:
        key = (record.prompt, record.ground_truth)
        if key not in seen:
            seen.add(key)
            kept.append(record)
    if len(kept) < len(records):
        logger.info("%s: dropped %d repeated rows of %d (%d distinct problems)", name, len(records) - len(kept),
                    len(records), len(kept))
    return kept


def load_dapo_math(path: str | Path, *, dedupe: bool = True, limit: int | None = None) -> list[Record]:
    """Load DAPO-Math-17k (parquet, jsonl or json; a hub id reads its fetched split) as records; ``id`` is
    ``dapo_math/<row>`` in file order.

    ``limit`` applies after deduplication: the first ``limit`` distinct problems.
    """
    path = local_dataset_file(path)
    records = [parse_dapo_row(row, id_prefix="dapo_math", row_no=i, path=path) for i, row in enumerate(read_rows(path))]
    if dedupe:
        records = dedupe_records(records, name=str(path))
    return records if limit is None else records[:limit]
