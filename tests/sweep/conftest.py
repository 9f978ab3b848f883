"""Shared pieces of the sweep tests: sweep files over the light ``recipes/curve.py``, ``launch.py`` as a subprocess,
synthetic metrics logs, and synthetic sweep directories (what a finished sweep leaves, without running one)."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable
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


def fake_sweep(sweep_dir: Path, points: list[dict], seeds: list[int],
               value: Callable[[dict, int, int], float | None], *, step: int = 4, mode: str = "max") -> Path:
    """A sweep directory as the runner leaves it: ``sweep.json``, ``state.json`` and one ``metrics.jsonl`` per trial
    (``points`` × ``seeds``, trial ids ``t00``, ``t01``, ..., configuration ids ``c00``, ...). Trial (point, seed)
    logs ``validation/accuracy`` = ``value(point, seed, s)`` at steps s = 1 .. ``step`` and stops at the first
    ``None``: ``done`` if it got to ``step``, else ``stopped``."""
    axes = list(dict.fromkeys(path for point in points for path in point))
    records = {}
    for c, point in enumerate(points):
        for seed in seeds:
            trial = f"t{len(records):02d}"
            rows = {}
            for s in range(1, step + 1):
                if (v := value(point, seed, s)) is None:
                    break
                rows[s] = {"validation/accuracy": v, "timing/train/total_step_time": 0.5}
            write_metrics(sweep_dir / "trials" / trial, rows)
            records[trial] = {"state": "done" if step in rows else "stopped", "reason": None if step in rows
                              else f"stopped after step {len(rows)}", "point": point, "seed": seed,
                              "config_id": f"c{c:02d}", "run_dir": f"trials/{trial}", "attempts": 1}
    sweep = {"id": sweep_dir.name, "base": "experiments/tiny_cpu.py", "metric": "validation/accuracy", "mode": mode,
             "step": step, "step_time_metric": "timing/train/total_step_time", "axes": axes}
    (sweep_dir / "sweep.json").write_text(json.dumps(sweep))
    (sweep_dir / "state.json").write_text(json.dumps({"trials": records}))
    return sweep_dir


def lam_grid(sweep_dir: Path) -> Path:
    """A 2-D grid, λ_value (3) × λ_policy (3) × 3 seeds, 8 steps, best at (0.99, 0.95); configuration (1.0, 0.9)
    stops at step 3 (the heatmap's empty cell)."""
    values = [(v, p) for v in (0.95, 0.99, 1.0) for p in (0.9, 0.95, 1.0)]
    points = [{"advantage.lam_value": v, "advantage.lam_policy": p} for v, p in values]

    def accuracy(point: dict, seed: int, s: int) -> float | None:
        v, p = point["advantage.lam_value"], point["advantage.lam_policy"]
        if (v, p) == (1.0, 0.9) and s > 3:
            return None
        quality = 0.7 - 60 * (v - 0.99) ** 2 - 8 * (p - 0.95) ** 2 + 0.02 * math.sin(3 * seed + 40 * v + 20 * p)
        return quality * (1 - math.exp(-s / 3))

    return fake_sweep(sweep_dir, points, [0, 1, 2], accuracy, step=8)
