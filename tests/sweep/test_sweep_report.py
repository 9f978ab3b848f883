"""``analysis/sweep_report.py``: tables per trial and per configuration, CSV / Markdown / HTML, and ``--export-best``
whose file ``launch.py`` runs."""

import base64
import csv
import json
import math
import re
import subprocess
import sys

import pytest

from ppo.sweep.results import load_results
from tests.sweep.conftest import REPO, lam_grid, run_launch, state, write_sweep
from tests.sweep.recipes.curve import reward

GRID = '''
axes=[Grid({"optim.lr": [1e-3, 1e-1]}), Grid({"lam": [0.95, 0.8]})],
seeds=[0, 1],
overrides=["steps=6", "step_s=0.3"],
metric="validation/accuracy", step=6,
stopping=EarlyStopping(gates=['data["train/reward"]["2"] > 0.1']),
poll_s=0.2,
'''


def report(*args):
    return subprocess.run([sys.executable, str(REPO / "analysis" / "sweep_report.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    sweep = write_sweep(root / "grid.py", GRID)
    rc, out, err = run_launch(str(sweep), "--run-dir", str(root / "sweep"), "--max-parallel", "4", cwd=root,
                              timeout=180)
    assert rc == 0, out + err
    return root / "sweep"


def expected_metric(lr, lam, seed, step=6):
    return 0.5 * reward(lr, lam, seed, step)


@pytest.mark.slow
def test_tables_aggregate_seeds_and_rank_configurations(swept):
    results = load_results(swept)
    trials, configs = results.trials, results.configs
    assert results.axes == ["optim.lr", "lam"]
    assert len(trials) == 8 and len(configs) == 4
    stopped = trials[trials["status"] == "stopped"]
    assert set(stopped["optim.lr"]) == {0.1} and len(stopped) == 2  # lr 0.1 with lam 0.8 fails the gate
    assert all(stopped["reason"].str.startswith('gate failed: data["train/reward"]["2"] > 0.1'))
    assert stopped["metric"].isna().all()
    best = configs.iloc[0]
    assert (best["rank"], best["optim.lr"], best["lam"], best["n"]) == (1, 1e-3, 0.95, 2)
    values = [expected_metric(1e-3, 0.95, seed) for seed in (0, 1)]
    assert best["mean"] == pytest.approx(sum(values) / 2, rel=1e-9)
    assert best["std"] == pytest.approx(abs(values[0] - values[1]) / math.sqrt(2), rel=1e-6)
    assert best["mean ± std"] == f"{best['mean']:.4g} ± {best['std']:.2g} (n=2)"
    assert list(configs["mean"].iloc[:3]) == sorted(configs["mean"].iloc[:3], reverse=True)
    assert math.isnan(configs.iloc[3]["mean"]) and configs.iloc[3]["stopped"] == 2
    row = trials[(trials["optim.lr"] == 1e-3) & (trials["lam"] == 0.95) & (trials["seed"] == 1)].iloc[0]
    assert (row["status"], row["steps"], row["best_step"], row["attempts"]) == ("done", 6, 6, 1)
    assert row["best"] == row["metric"] == pytest.approx(expected_metric(1e-3, 0.95, 1))
    assert row["step_time"] >= 0


@pytest.mark.slow
def test_report_writes_csv_markdown_and_an_offline_html_page(swept, tmp_path):
    result = report(swept, "--out", tmp_path / "out", "--top", "2")
    assert result.returncode == 0, result.stderr
    assert "| 1 | 0.001 | 0.95 |" in result.stdout
    with open(tmp_path / "out" / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and {"trial", "optim.lr", "lam", "seed", "status", "steps", "metric", "best",
                               "step_time", "reason"} <= set(rows[0])
    with open(tmp_path / "out" / "configs.csv") as f:
        configs = list(csv.DictReader(f))
    assert [c["rank"] for c in configs] == ["1", "2", "3", "4"] and configs[0]["n"] == "2"
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert markdown.startswith("# Sweep grid\n") and "## Configurations (seeds aggregated, best first)" in markdown
    page = (tmp_path / "out" / "report.html").read_text()
    assert re.findall(r'data-plot="(\w+)"', page) == ["curves"]  # the one plotly figure (no parcoords: WebGL)
    for name in ("by_axis", "heatmap", "curves", "parallel"):  # a 2-D grid: every figure, beside the page
        assert f'data-figure="{name}"' in page
        png = (tmp_path / "out" / f"{name}.png").read_bytes()
        assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in page
        assert (tmp_path / "out" / f"{name}.svg").read_text().startswith("<?xml")
        assert f"{name}.png, " in result.stdout and f"{name}.svg" in result.stdout
    from ppo.nightly.page import external_urls

    assert external_urls(page) == []


@pytest.mark.slow
def test_export_best_writes_an_experiment_that_launch_py_runs(swept, tmp_path):
    out = tmp_path / "best.py"
    result = report(swept, "--export-best", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "OVERRIDES = [\n    'steps=6',\n    'step_s=0.3',\n    'lam=0.95',\n    'optim.lr=0.001',\n]" in text
    rc, dry, err = run_launch(str(out), "--dry-run", cwd=tmp_path)
    assert rc == 0, err
    assert "optim.lr = 0.001\n" in dry and "lam = 0.95\n" in dry and "steps = 6\n" in dry
    rc, _, err = run_launch(str(out), "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert rc == 0, err
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["validation/accuracy"] == pytest.approx(expected_metric(1e-3, 0.95, 0))
    # the second best, and the refusals
    assert report(swept, "--export-best", tmp_path / "second.py", "--rank", "2").returncode == 0
    second = (tmp_path / "second.py").read_text()
    assert "'lam=0.8'" in second and "'optim.lr=0.001'" in second
    again = report(swept, "--export-best", out)
    assert again.returncode == 2 and "exists; choose another path" in again.stderr
    too_far = report(swept, "--export-best", tmp_path / "x.py", "--rank", "4")
    assert too_far.returncode == 2 and "no configuration has validation/accuracy at step 6" in too_far.stderr


def test_report_of_a_directory_that_is_not_a_sweep(tmp_path):
    result = report(tmp_path)
    assert result.returncode == 2 and result.stderr == f"sweep_report.py: {tmp_path} is not a sweep directory " \
                                                       f"(no sweep.json)\n"


def test_report_works_while_trials_are_pending(tmp_path):
    import shutil

    sweep = lam_grid(tmp_path / "sweep")
    trials = json.loads((sweep / "state.json").read_text())
    first = next(iter(trials["trials"]))
    shutil.rmtree(sweep / trials["trials"][first]["run_dir"])
    trials["trials"][first]["state"] = "pending"
    (sweep / "state.json").write_text(json.dumps(trials))
    results = load_results(sweep)
    row = results.trials[results.trials["trial"] == first].iloc[0]
    assert row["status"] == "pending" and math.isnan(row["metric"]) and math.isnan(row["steps"])
    assert results.configs["active"].sum() == 1
    assert state(sweep)[first]["state"] == "pending"
