"""Shared pieces of the nightly tests: the CLIs as subprocesses, the fake launcher, run directories with
real-looking metrics logs, a small git repository, and a synthetic multi-night history."""

from __future__ import annotations

import hashlib
import json
import math
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.metrics import MetricsWriter
from ppo.nightly.baseline import band
from ppo.nightly.history import KEY_METRICS, Baseline, NightRecord, write_baseline, write_record

REPO = Path(__file__).resolve().parents[2]
FAKE_LAUNCH = Path(__file__).with_name("fake_launch.py")

STEP = 20
CHECKS = [
    f'data["validation/accuracy"]["{STEP}"] >= 0.6',
    'mean(data["train/critic/explained_var"], -5) > 0',
    'max(data["train/token_mult_prob_error"]) < 1.05',
    '0 <= min(data["train/critic/loss"]) and max(data["train/critic/loss"]) < 6',
]


def fake_launcher() -> str:
    return shlex.join([sys.executable, str(FAKE_LAUNCH)])


def run_cli(script: str, *args: object, cwd: Path = REPO, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "analysis" / script), *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )


def write_experiment(path: Path, *, step: int | None = STEP, checks: list[str] = CHECKS) -> Path:
    nightly = {"checks": checks} if step is None else {"step": step, "checks": checks}
    path.write_text(f'"""A stand-in experiment: only its NIGHTLY is read."""\n\nNIGHTLY = {nightly!r}\n')
    return path


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "exp_fake.py")


def curves(steps: int = STEP, *, seed: int = 0, quality: float = 0.8, mult_error: float = 1.002) -> dict:
    """Reference-layout key metrics shaped like a PPO run that learns (validation every 5 steps)."""
    rng = random.Random(seed)
    out: dict[str, dict[str, float]] = {m: {} for m in KEY_METRICS}
    for step in range(0, steps + 1):
        progress = 1.0 - math.exp(-step / (steps / 4))
        if step > 0:
            out["train/reward"][str(step)] = quality * progress + rng.gauss(0, 0.02)
            out["train/critic/loss"][str(step)] = 2.0 * (1 - progress) + 0.3 + rng.gauss(0, 0.05)
            out["train/critic/explained_var"][str(step)] = -0.5 + 1.3 * progress + rng.gauss(0, 0.03)
            out["train/kl_penalty"][str(step)] = 0.001 * step + abs(rng.gauss(0, 0.0005))
            out["train/token_mult_prob_error"][str(step)] = mult_error + abs(rng.gauss(0, 0.001))
        if step % 5 == 0:
            out["validation/accuracy"][str(step)] = 0.05 + (quality - 0.05) * progress + rng.gauss(0, 0.01)
    return out


def write_run_dir(
    run_dir: Path, *, steps: int = STEP, seed: int = 0, quality: float = 0.8, commit: str | None = None,
    config: dict[str, str] | None = None, partial_tail: bool = True,
) -> Path:
    """A run directory as the trainer leaves it: metrics.jsonl through the library's writer (a line per step,
    validation records separate, a partial last line as a killed writer leaves), plus config.txt and git.json."""
    data = curves(steps, seed=seed, quality=quality)
    with MetricsWriter(run_dir) as writer:
        for step in range(0, steps + 1):
            train = {m: s[str(step)] for m, s in data.items() if m != "validation/accuracy" and str(step) in s}
            if train:
                writer.log(step, {**train, "train/lr": 2e-5, "timing/train/total": 1.5})
            if str(step) in data["validation/accuracy"]:
                writer.log(step, {"validation/accuracy": data["validation/accuracy"][str(step)]})
    if partial_tail:
        with (run_dir / "metrics.jsonl").open("a") as f:
            f.write('{"step": 21, "train/rew')
    flat = {"name": "'tiny_cpu'", "seed": str(seed), "trainer.max_steps": str(steps), "policy.optimizer.lr": "2e-05"}
    flat.update(config or {})
    (run_dir / "config.txt").write_text("".join(f"{k} = {v}\n" for k, v in sorted(flat.items())))
    if commit:
        (run_dir / "git.json").write_text(json.dumps({"commit": commit, "dirty": False}))
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
