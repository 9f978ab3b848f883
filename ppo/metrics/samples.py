"""Generated text kept with a run: ``<run_dir>/samples/step_N.jsonl``, one JSON object per answer.

Validation writes every answer (``split: "validation"``, ``mode``: greedy or sampled); training a fraction of each
step's samples (``trainer.train_sample_fraction``, ``split: "train"``).  A step's file is written whole, atomically,
so a resumed run that repeats the step replaces it."""

from __future__ import annotations

import json
from pathlib import Path

from ppo.atomic import write_text_atomic

SAMPLES = "samples"


def samples_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / SAMPLES / f"step_{step}.jsonl"


def write_samples(run_dir: Path, step: int, rows: list[dict]) -> Path | None:
    """The step's rows as JSON lines (nothing when there are none); the file's path."""
    if not rows:
        return None
    path = samples_path(run_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def read_samples(run_dir: Path, step: int) -> list[dict]:
    path = samples_path(run_dir, step)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def every_nth(count: int, fraction: float) -> list[int]:
    """Evenly spaced indices of about ``fraction`` of ``count`` items (none for 0, all for 1)."""
    if fraction <= 0 or count == 0:
        return []
    return list(range(0, count, max(1, round(1 / fraction))))
