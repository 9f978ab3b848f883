"""SIGKILL a run at awkward moments and resume it: the metrics must equal those of the uninterrupted run.

The kills take the whole process tree (driver, Ray daemons, workers, the vLLM engine) at once, as the OOM killer or
a lost node would.  The first lands while a checkpoint is being written (the step's metrics line is written just
before its checkpoint starts), the second exactly at a step boundary (the moment a checkpoint is complete).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ppo.metrics import load_metrics

from .conftest import ROOT, RUN_TIMEOUT, launch_command, run_to_completion, trained_metrics

pytestmark = pytest.mark.slow


def kill_tree_when(command: list[str], condition, *, timeout: float = RUN_TIMEOUT) -> None:
    """Start ``command``; the moment ``condition()`` holds, SIGKILL it and every process below it."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout
    try:
        while not condition():
            if proc.poll() is not None:
                log = Path(command[-1]) / "job.log"  # both commands end with the run directory
                tail = log.read_text()[-3000:] if log.is_file() else "(no job.log)"
                pytest.fail(f"the run ended (exit {proc.returncode}) before the moment to kill it:\n{tail}")
            if time.monotonic() > deadline:
                pytest.fail("the moment to kill the run never came")
            time.sleep(0.02)
    finally:
        try:
            root = psutil.Process(proc.pid)
            victims = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            victims = []
        for victim in victims:
            try:
                victim.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(victims, timeout=30)
        proc.wait()


def logged_steps(run_dir: Path) -> int:
    try:
        return max((int(s) for s in load_metrics(run_dir).get("train/reward", {})), default=0)
    except (FileNotFoundError, ValueError):
        return 0


def job_command(run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "ppo.launch.job", str(run_dir)]


def test_killed_twice_and_resumed_equals_the_uninterrupted_run(reference_run, tmp_path):
    run_dir = tmp_path / "killed"
    kill_tree_when(launch_command(run_dir), lambda: logged_steps(run_dir) >= 2)
    kill_tree_when(job_command(run_dir), lambda: (run_dir / "checkpoints" / "step_000003").is_dir())
    run_to_completion(job_command(run_dir))

    expected, resumed = trained_metrics(reference_run), trained_metrics(run_dir)
    assert sorted(resumed) == sorted(expected)
    for name, series in expected.items():
        assert resumed[name] == series, name
    leftovers = [p.name for p in (run_dir / "checkpoints").iterdir() if p.name.endswith(".partial")]
    assert leftovers == []


def test_a_torn_checkpoint_is_never_loaded(reference_run, tmp_path):
    """A ``.partial`` directory newer than every complete checkpoint (a write cut short) is passed over."""
    import shutil

    run_dir = tmp_path / "torn"
    shutil.copytree(reference_run, run_dir, ignore=shutil.ignore_patterns("metrics.jsonl"))
    checkpoints = run_dir / "checkpoints"
    for late in ("step_000004", "step_000005"):
        shutil.rmtree(checkpoints / late)
    torn = checkpoints / "step_000004.partial"
    shutil.copytree(checkpoints / "step_000003", torn)
    for f in (torn / "policy").rglob("*"):
        if f.is_file():
            f.write_bytes(b"")
    (run_dir / "metrics.jsonl").write_text("")
    run_to_completion(job_command(run_dir))

    expected, resumed = trained_metrics(reference_run), trained_metrics(run_dir)
    for name, series in resumed.items():
        assert series == {s: v for s, v in expected[name].items() if int(s) > 3}, name
    assert not torn.exists()
