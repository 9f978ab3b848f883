"""Short PPO runs of the embedded default, launched the way a user launches them (``launch.py`` in a subprocess).

One reference run per session serves the functional-gate test and the kill/resume tests, so the suite pays for
Ray, vLLM and Megatron start-up only a few times.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.metrics import load_metrics

ROOT = Path(__file__).resolve().parents[2]

SHORT_RUN = [
    "trainer.max_steps=5",
    "trainer.prompts_per_step=32",
    "trainer.generations_per_prompt=4",
    "trainer.num_minibatches=2",
    "trainer.policy_training_start_step=2",
    "trainer.warm_start_steps=40",
    "trainer.val_period=2",
    "trainer.checkpoint_period=1",
    "trainer.keep_checkpoints=10",
    "task.val_size=32",
]
"""A few steps of ``experiments/tiny_cpu.py``: critic warmup for 2 steps, a checkpoint after every step."""

RUN_TIMEOUT = 600


def launch_command(run_dir: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(ROOT / "launch.py"), str(ROOT / "experiments" / "tiny_cpu.py"), *SHORT_RUN,
            *overrides, "--run-dir", str(run_dir)]


def run_to_completion(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if result.returncode != 0:
        pytest.fail(f"{' '.join(command[1:3])} failed ({result.returncode}):\n{result.stdout[-4000:]}"
                    f"\n{result.stderr[-4000:]}")


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    """The short run, with the trainer's own HF export at the end (``export/``, which changes no metric)."""
    run_dir = tmp_path_factory.mktemp("ppo") / "reference"
    run_to_completion(launch_command(run_dir, "trainer.export_hf=True"))
    return run_dir


def trained_metrics(run_dir: Path) -> dict[str, dict[str, float]]:
    """The run's metrics without wall-clock timings and the driver's byte count (the part two runs of the same seed
    must agree on; ``train/driver_bytes`` counts pickled call arguments, whose size moves by a few bytes with how the
    loop scheduled its calls)."""
    return {name: series for name, series in load_metrics(run_dir).items()
            if not name.startswith("timing/") and name != "train/driver_bytes"}
