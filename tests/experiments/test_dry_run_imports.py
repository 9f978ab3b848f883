"""A dry run of a GPU recipe imports no torch, Megatron or vLLM: it shows the config, the plan and the sbatch script at
the cost of the config alone (well under a second).  Checked on ``launch.py`` itself, in a fresh interpreter, from
the modules it imports (``-X importtime``), not by timing it.
"""

import re
import subprocess
import sys

import pytest

from tests.experiments.conftest import EXPERIMENTS, REPO

pytestmark = pytest.mark.slow  # a fresh interpreter each: about a second a test

HEAVY = ("torch", "megatron", "vllm")


def imported_modules(*args: str) -> tuple[set[str], str]:
    result = subprocess.run([sys.executable, "-X", "importtime", str(REPO / "launch.py"), *args], cwd=REPO,
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    modules = {m.group(1) for m in re.finditer(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)$", result.stderr, re.M)}
    assert "ppo.launch.cli" in modules  # the import log was read
    return modules, result.stdout


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_dsr1_7b_slurm_dry_run_imports_no_torch_megatron_or_vllm():
    modules, out = imported_modules("experiments/dsr1_7b.py", "--executor", "slurm", "--dry-run")
    assert heavy(modules) == []
    assert "#SBATCH --nodes=8" in out and "experiments._base" in modules


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_no_experiment_dry_run_imports_them(experiment):
    modules, _ = imported_modules(str(experiment.relative_to(REPO)), "--dry-run")
    assert heavy(modules) == []
