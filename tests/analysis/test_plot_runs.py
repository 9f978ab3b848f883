import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def write_run(run_dir: Path, accuracy: list[float]) -> None:
    run_dir.mkdir()
    lines = [json.dumps({"step": 10 * i, "validation/accuracy": a}) for i, a in enumerate(accuracy)]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_plot_runs_draws_one_line_per_run(tmp_path):
    write_run(tmp_path / "a", [0.1, 0.4, 0.8])
    write_run(tmp_path / "b", [0.1, 0.2, 0.3])
    out = tmp_path / "fig.svg"
    result = subprocess.run([sys.executable, str(ROOT / "analysis" / "plot_runs.py"), str(tmp_path / "a"),
                             str(tmp_path / "b"), "--label", "PPO", "--label", "raw", "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    svg = out.read_text()
    assert "validation/accuracy" in svg and "PPO" in svg and "raw" in svg


@pytest.mark.slow
def test_plot_runs_reports_a_missing_run_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "analysis" / "plot_runs.py"), str(tmp_path / "nope"),
                             "--out", str(tmp_path / "fig.svg")], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "nope" in result.stderr
