"""The dry run imports only what it uses: a SLURM recipe's dry run (its memory plan, its hub model looked up in the
cache) loads neither huggingface_hub (the cache is read directly, ``ppo.models.hub.snapshot_folder``) nor numpy
(no data is drawn), nor torch, transformers or vLLM: each is a tenth of a second or more of a command run by hand.
Nor psutil, which only the SLURM job's own code uses (``ppo.launch.slurm_job``, imported where a job is submitted);
nor libcst and absl.logging, which Fiddle imports for paths a dry run does not take (``ppo.config.fiddle_import``:
a third of the dry run); nor the sweep package, for a file that is not a sweep (``launch.py``)."""

import subprocess
import sys

import pytest

from tests.launch.conftest import REPO

HEAVY = ("huggingface_hub", "numpy", "torch", "transformers", "vllm", "ray", "psutil", "libcst", "absl.logging",
         "ppo.sweep")


@pytest.mark.slow
def test_the_dry_run_of_a_slurm_recipe_imports_no_heavy_package():
    probe = ("import runpy, sys; sys.argv = ['launch.py', 'experiments/dsr1_7b.py', '--executor', 'slurm', "
             "'--dry-run']\ntry:\n    runpy.run_path('launch.py', run_name='__main__')\nexcept SystemExit as e:\n"
             f"    assert not e.code, e.code\nprint('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "LOADED []"


@pytest.mark.slow
def test_the_dry_run_plans_the_memory_once_and_still_checks_and_prints_it():
    """The layout check, the node request and the report each ask for the memory plan; it is computed once (counted
    by wrapping the real ``plan_memory``), and the dry run still prints its table and the host memory line."""
    probe = ("import runpy, sys\nimport ppo.experiment as experiment\nreal, calls = experiment.plan_memory, []\n"
             "experiment.plan_memory = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
             "sys.argv = ['launch.py', 'experiments/dsr1_7b.py', '--executor', 'slurm', '--dry-run']\ntry:\n"
             "    runpy.run_path('launch.py', run_name='__main__')\nexcept SystemExit as e:\n"
             "    assert not e.code, e.code\nprint('PLANS', len(calls))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "PLANS 1"
    assert "== memory plan" in out.stdout and "host memory:" in out.stdout
