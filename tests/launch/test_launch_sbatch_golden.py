"""The sbatch scripts ``--dry-run`` prints (and submitit submits) against golden files.

Update them on purpose with ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/launch -k golden`` and review the diff.
"""

from pathlib import Path

import pytest

from ppo.launch.prepare import Request, prepare
from ppo.launch.slurm import render_sbatch
from tests.golden import RUN_DIR, assert_matches_golden, normalise

GOLDEN = Path(__file__).parent / "golden"

CASES = {
    "one_node": Request("tests/launch/recipes/toy.py", executor="slurm", overrides=[
        "executor.nodes=1", "executor.gpus_per_node=4", "executor.partition=debug", "executor.time_minutes=30",
        "executor.container_image=nvcr.io/nvidia/pytorch:25.01-py3", "executor.container_mounts=/lustre:/lustre",
        "gpus=4"]),
    "eight_nodes": Request("tests/launch/recipes/toy.py", fiddlers=["on_slurm"], name="dsr1-7b-ppo"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sbatch_matches_golden(case, monkeypatch):
    monkeypatch.chdir(Path(__file__).parents[2])
    prepared = prepare(CASES[case])
    script = normalise(render_sbatch(prepared.executor, prepared.name, RUN_DIR))
    assert_matches_golden(GOLDEN / f"{case}.sbatch", script)


def test_goldens_have_no_machine_paths():
    for golden in GOLDEN.glob("*.sbatch"):
        text = golden.read_text()
        assert "/work/" not in text and "/tmp/" not in text and str(Path.home()) + "/" not in text
