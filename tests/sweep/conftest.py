"""Shared pieces of the sweep tests: sweep files over the light ``recipes/curve.py``, ``launch.py`` as a subprocess,
synthetic metrics logs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from ppo.metrics import MetricsWriter
from tests.launch.conftest import REPO, run_launch  # noqa: F401 - re-exported for the tests

CURVE = REPO / "tests" / "sweep" / "recipes" / "curve.py"


def write_sweep(path: Path, body: str, base: Path = CURVE) -> Path:
    """A sweep file at ``path``: ``SWEEP = Sweep(base=<curve.py>, <body>)`` with every ``ppo.sweep`` name imported."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("from ppo.sweep import *\n\n" + f"SWEEP = Sweep(\n    base={str(base)!r},\n"
                    + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n)\n")
    return path


def write_metrics(run_dir: Path, rows: dict[int, dict[str, float]]) -> Path:
    """``metrics.jsonl`` in ``run_dir`` with one record per step."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with MetricsWriter(run_dir) as writer:
        for step, values in sorted(rows.items()):
            writer.log(step, values)
    return run_dir / "metrics.jsonl"


def state(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "state.json").read_text())["trials"]
