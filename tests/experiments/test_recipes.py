"""Every experiment file: its graph builds and validates, stores as JSON and loads back, and its dry run renders;
flattened configs and (for SLURM recipes) sbatch scripts match golden files.

Update the goldens on purpose with ``UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/experiments`` and review the
diff: a changed line is a changed recipe.
"""

import dataclasses
import re
from pathlib import Path

import fiddle as fdl
import pytest

from ppo.config.printing import diff, flattened_text
from ppo.config.serialization import from_json, to_json
from ppo.launch.executors import SlurmExecutor
from ppo.launch.prepare import Request, prepare, request_node_resources
from ppo.launch.report import dry_run_text
from ppo.launch.slurm import render_sbatch
from ppo.nightly.suite import read_nightly
from tests.experiments.conftest import EXPERIMENTS, REPO
from tests.golden import assert_matches_golden, normalise
from tests.launch.conftest import run_launch

GOLDEN = Path(__file__).parent / "golden"
GPU_RECIPES = ["dsr1_7b", "math_1b", "qwen2p5_1p5b_gsm8k"]


def run_dir(name: str) -> Path:
    return Path(f"/shared/runs/{name}-20260101-000000")


@pytest.fixture(params=EXPERIMENTS, ids=lambda p: p.stem)
def prepared(request, monkeypatch):
    monkeypatch.chdir(REPO)
    return prepare(Request(str(request.param.relative_to(REPO)), dry_run=True))


def test_the_gpu_recipes_exist():
    assert {p.stem for p in EXPERIMENTS} >= {*GPU_RECIPES, "tiny_cpu"}


@pytest.mark.parametrize("recipe, used", [("dsr1_7b", "GPUs used: 64 of 64"), ("math_1b", "GPUs used: 8 of 8"),
                                          ("qwen2p5_1p5b_gsm8k", "GPUs used: 8 of 8")])
def test_the_gpu_recipes_use_every_gpu(recipe, used, monkeypatch):
    monkeypatch.chdir(REPO)
    prepared = prepare(Request(f"experiments/{recipe}.py", dry_run=True))
    text = dry_run_text(prepared, run_dir(recipe), None)
    grid = text.split("== GPU map")[1].split("\n\n")[0]
    assert grid.splitlines()[-1] == used
    assert "idle" not in grid


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_the_gpu_recipes_fit_their_gpus_by_the_memory_plan(recipe, monkeypatch):
    """The memory plan follows the GPU map and ends with its peak, within executor.gpu_memory_gib (80)."""
    monkeypatch.chdir(REPO)
    prepared = prepare(Request(f"experiments/{recipe}.py", dry_run=True))
    section = dry_run_text(prepared, run_dir(recipe), None).split("== memory plan")[1].split("\n\n")[0]
    for phase in ("generation", "logprobs/values", "training", "refit"):
        assert phase in section.splitlines()[2]
    peak = re.fullmatch(r"peak memory: ([0-9.]+) GiB of 80 GiB \((\S+), node\d+/gpu\d+\)", section.splitlines()[-1])
    assert peak and 0 < float(peak[1]) <= 80, section.splitlines()[-1]


@pytest.mark.slow
def test_a_gpu_too_small_for_dsr1_7b_is_refused_in_one_line():
    rc, out, err = run_launch("experiments/dsr1_7b.py", "--executor", "slurm", "--dry-run",
                              "executor.gpu_memory_gib=24")
    assert rc == 2 and out == "", (rc, out)
    assert len(err.strip().splitlines()) == 1, err
    assert "memory: the training phase needs" in err and "executor.gpu_memory_gib=24" in err and "raise " in err


def test_graph_builds_validates_and_round_trips_through_json(prepared):
    experiment = prepared.experiment
    experiment.check()
    assert isinstance(experiment.resource_plan(), list)
    loaded = from_json(to_json(prepared.cfg))
    assert diff(prepared.cfg, loaded) == []
    assert flattened_text(loaded) == flattened_text(prepared.cfg)
    built = fdl.build(loaded)
    if isinstance(built.executor, SlurmExecutor):  # the job's CPUs and memory, as the launcher fills them in
        built = dataclasses.replace(built, executor=request_node_resources(built.executor, built))
    assert built == experiment


def test_dry_run_renders_config_plan_executor_and_sbatch(prepared):
    executor, where = prepared.executor, run_dir(prepared.name)
    sbatch = render_sbatch(executor, prepared.name, where) if isinstance(executor, SlurmExecutor) else None
    text = dry_run_text(prepared, where, sbatch)
    assert "== config" in text and "== resource plan" in text and "policy" in text
    assert f"name = '{prepared.name}'" in text
    if sbatch is not None:
        assert f"#SBATCH --nodes={executor.nodes}" in text
        assert f"#SBATCH --gpus-per-node={executor.gpus_per_node}" in text


def test_nightly_checks_parse_and_look_at_a_logged_validation_step(prepared):
    nightly = prepared.file.nightly
    assert nightly is not None and nightly["checks"], f"{prepared.file.path} declares no NIGHTLY checks"
    step, trainer = nightly["step"], prepared.experiment.trainer
    assert step <= trainer.max_steps
    assert step % trainer.val_period == 0 or step == trainer.max_steps, "validation metrics are logged at that step"
    assert read_nightly(prepared.file.path).step == step  # how the nightly runner reads it


def test_flattened_config_matches_golden(prepared):
    assert_matches_golden(GOLDEN / f"{prepared.file.path.stem}.txt", normalise(flattened_text(prepared.cfg)) + "\n")


@pytest.mark.parametrize("recipe", GPU_RECIPES)
def test_gpu_recipe_is_a_slurm_job_whose_sbatch_matches_golden(recipe, monkeypatch):
    monkeypatch.chdir(REPO)
    prepared = prepare(Request(f"experiments/{recipe}.py", dry_run=True))
    executor = prepared.executor
    assert isinstance(executor, SlurmExecutor) and executor.gpus_per_node == 8
    script = normalise(render_sbatch(executor, prepared.name, run_dir(prepared.name)))
    assert_matches_golden(GOLDEN / f"{recipe}.sbatch", script)


def test_a_job_on_shared_nodes_asks_for_the_cores_and_memory_its_plan_needs(monkeypatch):
    """Without --exclusive, dsr1_7b asks for a core per worker process and the host memory the memory plan counts in
    its worst phase (31 cores: 24 ranks, 4 engine actors, a math worker, the driver and Ray); with it, for all of
    each node's memory (--mem=0)."""
    monkeypatch.chdir(REPO)
    prepared = prepare(Request("experiments/dsr1_7b.py", ["executor.additional_parameters=None"], dry_run=True))
    assert (prepared.executor.cpus_per_task, prepared.executor.mem_gb) == (31, 370)
    script = normalise(render_sbatch(prepared.executor, prepared.name, run_dir(prepared.name)))
    assert_matches_golden(GOLDEN / "dsr1_7b_shared_nodes.sbatch", script)
    pinned = prepare(Request("experiments/dsr1_7b.py", ["executor.additional_parameters=None",
                                                        "executor.cpus_per_task=64", "executor.mem_gb=1000"],
                             dry_run=True))
    assert (pinned.executor.cpus_per_task, pinned.executor.mem_gb) == (64, 1000), "what the user set stays"


def test_goldens_have_no_machine_paths():
    goldens = list(GOLDEN.iterdir())
    assert goldens
    for golden in goldens:
        text = golden.read_text()
        assert "/work/" not in text and "/tmp/" not in text and str(Path.home()) + "/" not in text, golden
