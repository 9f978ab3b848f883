"""Shared pieces of the nightly tests: the CLIs as subprocesses, run directories made by the real launch.py from
the stand-in experiment (tests/nightly/stand_in.py), a small git repository, and a synthetic multi-night history."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.nightly.baseline import band
from ppo.nightly.history import KEY_METRICS, Baseline, NightRecord, write_baseline, write_record
from tests.nightly.stand_in import CHECKS, STEP, curves

REPO = Path(__file__).resolve().parents[2]
FAKE_LAUNCH = Path(__file__).with_name("fake_launch.py")
STAND_IN = Path(__file__).with_name("stand_in.py")


def fake_launcher() -> str:
    """launch.py as a SLURM submit host shows it (tests/nightly/fake_launch.py)."""
    return shlex.join([sys.executable, str(FAKE_LAUNCH)])


def run_cli(script: str, *args: object, cwd: Path = REPO, timeout: float = 180,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``analysis/<script> ARGS`` in a subprocess; ``env`` is added to this process's environment."""
    return subprocess.run(
        [sys.executable, str(REPO / "analysis" / script), *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})},
    )


def write_experiment(path: Path, *, step: int | None = STEP, checks: list[str] = CHECKS) -> Path:
    """A self-contained experiment file: a copy of the stand-in whose NIGHTLY is replaced by the one given."""
    nightly = {"checks": checks} if step is None else {"step": step, "checks": checks}
    path.write_text(f"{STAND_IN.read_text()}\n\nNIGHTLY = {nightly!r}\n")
    return path


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "exp_fake.py")


def launch_stand_in(run_dir: Path, *overrides: str) -> Path:
    """A run directory as launch.py and the job leave it: the stand-in launched for real (its metrics.jsonl written
    by the library's writer), plus the partial last line a killed writer leaves, which readers must skip."""
    done = subprocess.run(
        [sys.executable, str(REPO / "launch.py"), str(STAND_IN), *overrides, "--run-dir", str(run_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write('{"step": 21, "train/rew')
    return run_dir


def make_git_repo(path: Path, messages: list[str]) -> list[str]:
    """A repository with one commit per message; returns their hashes, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(path)], check=True)
    hashes = []
    for i, message in enumerate(messages):
        (path / "file.txt").write_text(f"{i}\n")
        subprocess.run([*git, "-C", str(path), "add", "file.txt"], check=True)
        subprocess.run([*git, "-C", str(path), "commit", "-q", "-m", message], check=True)
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        hashes.append(done.stdout.strip())
    return hashes


def record(recipe: str, night: str, status: str, *, commit: str, config: str, failing: dict | None = None,
           quality: float = 0.8, seed: int = 0, reason: str = "", **fields) -> NightRecord:
    """A synthetic night record with curves and check results consistent with ``status``."""
    failing = failing or {}
    checks = []
    for check in CHECKS:
        if status == "INFRA-FAIL":
            checks.append({"check": check, "status": "INFRA-FAIL", "value": None,
                           "message": f"the run stopped at step 12; the checks need step {STEP}"})
        elif check in failing:
            value = failing[check]
            checks.append({"check": check, "status": "FAIL", "value": value, "message": f"false: {value} >= 0.6"})
        else:
            checks.append({"check": check, "status": "PASS", "value": 0.75, "message": ""})
    steps = 12 if status == "INFRA-FAIL" else STEP
    return NightRecord(
        recipe=recipe, night=night, status=status, started_at=f"{night}T02:00:00+00:00",
        reason=reason or ("launcher exited 1 (the job failed): node died" if status == "INFRA-FAIL" else ""),
        step_needed=STEP, last_step=steps, checks=checks, experiment=f"experiments/{recipe}.py",
        overrides=[f"trainer.max_steps={STEP}"], executor="slurm", git_commit=commit, git_dirty=False,
        config_hash=hashlib.sha256(config.encode()).hexdigest(), config_text=config, versions={"torch": "2.13.0"},
        run_dir=f"/runs/{night}/{recipe}", wall_time_s=3600.0, curves=curves(steps, seed=seed, quality=quality),
        **fields,
    )


def synthetic_history(history: Path, repo: Path) -> dict:
    """Four nights of three recipes, a baseline, and a git repository with the commits they ran at.

    tiny_cpu: PASS, PASS, FAIL (the regression: lr changed in the config, two commits in between), FAIL.
    gsm8k_1n: PASS, INFRA-FAIL, PASS, PASS.   dapo_8n: INFRA-FAIL on two nights, no record on the others.
    """
    commits = make_git_repo(repo, ["base", "refactor the critic", "change the default lr", "unrelated"])
    config_a = "policy.optimizer.lr = 2e-05\nseed = 0\ntrainer.max_steps = 20\n"
    config_b = "policy.optimizer.lr = 5e-05\nseed = 0\ntrainer.max_steps = 20\n"
    low = {CHECKS[0]: 0.41}
    nights = ["2025-06-01", "2025-06-02", "2025-06-03", "2025-06-04"]
    records = [
        record("tiny_cpu", nights[0], "PASS", commit=commits[0], config=config_a, seed=1),
        record("tiny_cpu", nights[1], "PASS", commit=commits[0], config=config_a, seed=2),
        record("tiny_cpu", nights[2], "FAIL", commit=commits[2], config=config_b, failing=low, quality=0.45, seed=3),
        record("tiny_cpu", nights[3], "FAIL", commit=commits[3], config=config_b, failing=low, quality=0.45, seed=4,
               wandb_url="https://wandb.example/team/ppo/runs/abc123"),
        record("gsm8k_1n", nights[0], "PASS", commit=commits[0], config=config_a, seed=5),
        record("gsm8k_1n", nights[1], "INFRA-FAIL", commit=commits[0], config=config_a, seed=6),
        record("gsm8k_1n", nights[2], "PASS", commit=commits[2], config=config_a, seed=7),
        record("gsm8k_1n", nights[3], "PASS", commit=commits[3], config=config_a, seed=8),
        record("dapo_8n", nights[1], "INFRA-FAIL", commit=commits[0], config=config_a,
               reason="launcher exited 2 (bad command line or config): policy.parallel.tp=3 does not divide 8 GPUs"),
        record("dapo_8n", nights[3], "INFRA-FAIL", commit=commits[3], config=config_a),
    ]
    for r in records:
        write_record(history, r)
    runs = [curves(seed=100 + s) for s in range(3)]
    write_baseline(history, Baseline(
        recipe="tiny_cpu", metrics=band(runs, KEY_METRICS), seeds=[0, 1, 2],
        runs=[{"seed": s, "run_dir": f"/runs/baseline/seed-{s}", "exit_code": 0, "last_step": STEP, "used": True,
               "problem": ""} for s in range(3)],
    ))
    return {"commits": commits, "nights": nights, "records": records, "config_a": config_a, "config_b": config_b}
