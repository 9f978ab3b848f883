"""analysis/check_metrics.py end to end, as a nightly job runs it: a subprocess from the repository root."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.metrics import MetricsWriter

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "analysis/check_metrics.py"


def run_cli(*args: str, python_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *python_flags, SCRIPT, *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run that stopped at step 12 (killed mid-write of step 13), validation every 5 steps."""
    run = tmp_path / "run"
    with MetricsWriter(run) as writer:
        for step in range(1, 13):
            metrics = {"train/reward": step / 16, "train/token_mult_prob_error": 1.0 + step / 1000}
            if step % 5 == 0:
                metrics["validation/accuracy"] = 0.5 + step / 100
            writer.log(step, metrics)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 13, "train/rew')
    return run


def _rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("STATUS"))
    return [line.split(maxsplit=1) for line in lines[header + 1 : -1]]


def test_all_pass_exits_0_and_prints_the_table(run_dir):
    done = run_cli(
        run_dir / "metrics.jsonl",
        'data["train/reward"]["12"] > 0.7',
        'max(data["train/token_mult_prob_error"]) < 1.05',
        'mean(data["validation/accuracy"], -1) > 0.55',
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["STATUS", "CHECK", "VALUE", "MESSAGE"]
    assert [row[0] for row in _rows(done.stdout)] == ["PASS"] * 3
    assert 'data["train/reward"]["12"] > 0.7  ' in lines[2] and "0.75" in lines[2]
    assert "1.012" in lines[3]
    assert lines[-1] == "verdict: PASS (3 pass; last step 12)"
    assert "truncated last line" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_regression_exits_1(run_dir):
    done = run_cli(run_dir, 'data["train/reward"]["12"] > 0.7', '0.79 < data["train/reward"]["12"] < 1.29')
    assert done.returncode == 1, done.stderr
    rows = _rows(done.stdout)
    assert [row[0] for row in rows] == ["PASS", "FAIL"]
    assert rows[1][1].endswith("false: 0.79 < 0.75")


def test_a_missing_metric_or_step_is_a_fail_with_the_reason(run_dir):
    done = run_cli(run_dir, 'data["validation/accuracy"]["11"] > 0.6', 'data["train/rewards"]["1"] > 0')
    assert done.returncode == 1
    assert "metric 'validation/accuracy' has no step '11' (last step 10)" in done.stdout
    assert "no metric 'train/rewards' in the log (did you mean 'train/reward'?)" in done.stdout


def test_an_unreached_step_is_infra_fail_exit_3_even_beside_a_regression(run_dir, tmp_path):
    out = tmp_path / "summary.json"
    done = run_cli(
        run_dir,
        'data["train/reward"]["40"] > 0.75',
        'data["train/reward"]["12"] > 0.9',
        'data["train/reward"]["12"] > 0.7',
        "--json",
        out,
    )
    assert done.returncode == 3, done.stderr
    assert [row[0] for row in _rows(done.stdout)] == ["INFRA-FAIL", "FAIL", "PASS"]
    assert "metric 'train/reward' has no step '40' (the run stopped at step 12)" in done.stdout
    summary = json.loads(out.read_text())
    assert summary["verdict"] == "INFRA-FAIL" and summary["exit_code"] == 3
    assert summary["last_step"] == 12 and summary["metrics"] == str(run_dir)
    assert [c["status"] for c in summary["checks"]] == ["INFRA-FAIL", "FAIL", "PASS"]
    assert summary["checks"][0]["value"] is None and summary["checks"][2]["value"] == 0.75
    assert summary["counts"] == {"PASS": 1, "FAIL": 1, "INFRA-FAIL": 1}


def test_step_needed(run_dir):
    check = 'mean(data["train/reward"]) > 0'
    assert run_cli(run_dir, check, "--step-needed", "12").returncode == 0
    done = run_cli(run_dir, check, "--step-needed", "40")
    assert done.returncode == 3
    assert "the run stopped at step 12; the checks need step 40" in done.stdout


def test_an_empty_log_is_infra_fail(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    done = run_cli(tmp_path, "1 < 2")
    assert done.returncode == 3
    assert "the metrics log has no records" in done.stdout


def test_reference_layout_json_input(tmp_path):
    reference = tmp_path / "metrics.json"
    reference.write_text(json.dumps({"train/reward": {"40": 0.8, "39": 0.7}, "validation/accuracy": {"40": 0.66}}))
    done = run_cli(reference, 'data["train/reward"]["40"] > 0.75', 'data["validation/accuracy"]["40"] > 0.65')
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_flat_score_file_runs_nemo_rls_check_unchanged(tmp_path):
    """What NeMo-RL's evaluation recipes write (`sed ... > ${RUN_LOG}-8k-metric.json`) and check."""
    scores = tmp_path / "run-8k-metric.json"
    scores.write_text('{"score": 0.2604}\n')
    done = run_cli(scores, 'data["score"] >= 0.2396')
    assert done.returncode == 0, done.stdout + done.stderr
    assert _rows(done.stdout) == [["PASS", 'data["score"] >= 0.2396  0.2604']]
    assert run_cli(scores, 'data["score"] >= 0.3').returncode == 1
    done = run_cli(scores, "--score-step", "240", 'data["score"]["240"] >= 0.2396', "--step-needed", "240")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "verdict: PASS (1 pass; last step 240)"


def test_json_with_nonfinite_value_is_strict(tmp_path):
    with MetricsWriter(tmp_path) as writer:
        writer.log(1, {"train/loss": float("nan")})
    out = tmp_path / "out.json"
    done = run_cli(tmp_path, 'data["train/loss"]["1"] < 6', "--json", out)
    assert done.returncode == 1
    summary = json.loads(out.read_text(), parse_constant=lambda token: pytest.fail(f"bare {token} in JSON"))
    assert summary["checks"][0]["value"] == "NaN"


@pytest.mark.parametrize(
    ("args", "stderr_part"),
    [
        ((), "the following arguments are required"),
        (("RUN",), "the following arguments are required: EXPR"),
        (("RUN", "1 < 2", "--step-needed", "x"), "--step-needed: not an integer: 'x'"),
        (("RUN", "1 < 2", "--step-needed", "-3"), "must be >= 0"),
        (("RUN", "1 < 2", "--bogus"), "unrecognized arguments: --bogus"),
        (("RUN", "__import__('os').system('id')"), "check 1: this call is not allowed"),
        (("RUN", "1 < 2", "data.__class__"), "check 2: attribute access is not allowed"),
        (("RUN", "10**10**10 > 1"), "'**' is not allowed"),
        (("MISSING", "1 < 2"), "cannot read"),
        (("EMPTY_DIR", "1 < 2"), "without a metrics.jsonl"),
        (("CORRUPT", "1 < 2"), "metrics.jsonl:2: not valid JSON"),
        (("RUN", "1 < 2", "--json", "NO_DIR/out.json"), "cannot write"),
        (("RUN", "1 < 2", "--score-step", "3"), "a score step is only for a flat score file"),
    ],
)
def test_bad_command_line_or_file_exits_2_with_one_line(run_dir, tmp_path, args, stderr_part):
    (tmp_path / "empty").mkdir()
    corrupt = tmp_path / "corrupt" / "metrics.jsonl"
    corrupt.parent.mkdir()
    corrupt.write_text('{"step": 1, "a": 1.0}\n{"step": 2, "a": \n{"step": 3, "a": 1.0}\n')
    substitutions = {
        "RUN": str(run_dir),
        "MISSING": str(tmp_path / "missing.jsonl"),
        "EMPTY_DIR": str(tmp_path / "empty"),
        "CORRUPT": str(corrupt.parent),
        "NO_DIR/out.json": str(tmp_path / "no_dir" / "out.json"),
    }
    done = run_cli(*(substitutions.get(a, a) for a in args))
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "truncated last line" not in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("check_metrics.py: error: ")
    assert stderr_part in errors[0]
    assert "Traceback" not in done.stderr


def test_help_exits_0():
    done = run_cli("--help")
    assert done.returncode == 0
    assert "INFRA-FAIL" in done.stdout
    assert "--score-step N" in done.stdout and 'data["score"] >= 0.2396' in done.stdout


def test_runs_without_the_package_installed(run_dir):
    """`python -S` skips site-packages (and the editable install), so `ppo` is found only through the script's
    own fallback to the repository root; the checker needs nothing beyond the standard library."""
    done = run_cli(run_dir, 'data["train/reward"]["12"] > 0.7', python_flags=("-S",))
    assert done.returncode == 0, done.stderr
