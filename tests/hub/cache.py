"""Fill a Hugging Face hub cache in a test, offline, the way huggingface_hub lays out what it downloads::

    <cache>/models--org--name/blobs/<sha256>                 each file's content
    <cache>/models--org--name/snapshots/<commit>/<path>      a relative link to its blob
    <cache>/models--org--name/refs/<revision>                the commit the revision points to

(``datasets--org--name`` for datasets).  huggingface_hub has no public call that stores files without downloading
them, so the layout is written here; :func:`cache_repo` checks it with huggingface_hub's own ``scan_cache_dir``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path


def cache_repo(cache: Path, repo_id: str, files: dict[str, bytes], *, repo_type: str = "model",
               revision: str = "main") -> Path:
    """Store ``files`` (``{path in the repository: content}``) as ``repo_id`` at ``revision``; the snapshot folder."""
    from huggingface_hub import scan_cache_dir

    commit = hashlib.sha1(b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()
    repo = Path(cache) / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    for name, content in files.items():
        blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    scanned = {r.repo_id: r for r in scan_cache_dir(cache).repos if r.repo_type == repo_type}
    assert {f.file_name for rev in scanned[repo_id].revisions for f in rev.files} >= {Path(n).name for n in files}
    return snapshot


def model_files(config: dict) -> dict[str, bytes]:
    """A checkpoint's files without torch: ``config.json``, a one-tensor ``model.safetensors``, a tokenizer config."""
    import numpy as np
    from safetensors.numpy import save

    weights = save({"model.embed_tokens.weight": np.zeros((4, 2), dtype=np.float32)})
    return {"config.json": json.dumps(config).encode(), "model.safetensors": weights,
            "tokenizer_config.json": b"{}"}


DAPO_ROWS = [{"data_source": "math_dapo", "ability": "MATH", "extra_info": {"index": str(i)},
              "prompt": [{"role": "user", "content": f"Solve: {i} + {i}. Answer: $Answer"}],
              "reward_model": {"ground_truth": str(2 * i), "style": "rule-lean"}} for i in range(4)]
"""Rows in DAPO-Math-17k's schema (verl's RL layout)."""
AIME_ROWS = [{"ID": f"2024-I-{i}", "Problem": f"What is {i} squared?", "Solution": "...", "Answer": i * i}
             for i in range(1, 4)]
"""Rows in the plain AIME layout (Maxwell-Jia/AIME_2024's columns)."""
GSM8K_TRAIN = [{"question": "Tom has 2 apples and buys 3. How many?", "answer": "2 + 3 = 5\n#### 5"},
               {"question": "A box holds 1,000 pens; 80 are sold. How many are left?", "answer": "#### 920"}]
GSM8K_TEST = [{"question": "What is 6 times 7?", "answer": "#### 42"}]


def parquet_bytes(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


GSM8K_README = b"""---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
---
"""
"""openai/gsm8k's dataset card header: one config, ``main``, with a train and a test split."""


def gsm8k_files(train: list[dict], test: list[dict]) -> dict[str, bytes]:
    """openai/gsm8k's repository layout (its ``main`` config) holding ``train`` and ``test`` rows."""
    return {"README.md": GSM8K_README, "main/train-00000-of-00001.parquet": parquet_bytes(train),
            "main/test-00000-of-00001.parquet": parquet_bytes(test)}
