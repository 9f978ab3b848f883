"""A fresh clone works without the project machines' ``../shared``: the GSM8K recipe runs on the sample shipped in
the package (``ppo/data/gsm8k_sample``), from a clone whose parent directory holds nothing else."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ppo.metrics import load_metrics
from tests.experiments.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_gsm8k_recipe_runs_on_a_fresh_clone_with_no_shared_data(tmp_path):
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True, timeout=120)
    assert not (clone.parent / "shared").exists()
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(clone))  # the clone's ppo, in the driver and every worker
    result = subprocess.run(
        [sys.executable, "launch.py", "experiments/tiny_gsm8k_cpu.py", "--run-dir", str(run_dir),
         "trainer.max_steps=1", "trainer.warm_start_steps=5", "trainer.val_period=1", "trainer.checkpoint_period=1",
         "task.val_size=8", "trainer.wandb_mode=disabled"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    text = (run_dir / "config.txt").read_text()
    assert f"task.train_path = '{clone}/ppo/data/gsm8k_sample/train.jsonl'" in text
    metrics = load_metrics(run_dir)
    assert set(metrics["train/reward"]) == {"1"}
    assert "validation/accuracy" in metrics
