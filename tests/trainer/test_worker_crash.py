"""A worker that dies mid-run (here: the policy's Ray actor, SIGKILLed) ends the run with its error, not a hang."""

from __future__ import annotations

import json
import os
import subprocess
import time

import psutil
import pytest

from .conftest import ROOT, launch_command
from .test_kill_resume import logged_steps

pytestmark = pytest.mark.slow


def test_a_dead_policy_worker_fails_the_run_with_its_error(tmp_path):
    run_dir = tmp_path / "crash"
    proc = subprocess.Popen(launch_command(run_dir, "trainer.max_steps=50"), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    tree = psutil.Process(proc.pid)
    processes: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 300
        while logged_steps(run_dir) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached step 1"
            time.sleep(0.2)
        processes = tree.children(recursive=True)  # to clean up by PID whatever outlives the run
        workers = [p for p in processes if "ray::PolicyWorker" in " ".join(p.cmdline())]
        assert len(workers) == 1
        workers[0].kill()
        started = time.monotonic()
        assert proc.wait(timeout=120) != 0
        assert time.monotonic() - started < 120
    finally:
        if proc.poll() is None:
            proc.kill()
        for leftover in processes:
            try:
                leftover.kill()
            except psutil.NoSuchProcess:
                pass
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "FAILED"
    assert "Actor" in status["error"] or "actor" in status["error"], status["error"]
