"""``launch.py SWEEP --dry-run``: trials, differences, resources; and every trial validated before anything exists."""

import pytest

from tests.launch.conftest import launch_script
from tests.sweep.conftest import CURVE, run_launch, write_sweep

BODY = '''
axes=[Grid({"optim.lr": [1e-3, 1e-2]}), Tied({"lam": [0.9, 0.95], "clip": [0.1, 0.2]})],
seeds=[0, 1],
overrides=["steps=6"],
metric="validation/accuracy", step=6,
stopping=EarlyStopping(gates=['data["train/reward"]["2"] > 0.05'], rule=MedianStopping(rungs=[4])),
'''


def dry_run(capsys, *argv) -> tuple[int, str, str]:
    rc = launch_script().main([*map(str, argv), "--dry-run"])
    out, err = capsys.readouterr()
    return rc, out, err


def test_dry_run_lists_trials_their_differences_and_the_resources(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sweep = write_sweep(tmp_path / "lr_lam.py", BODY)
    rc, out, err = dry_run(capsys, sweep)
    assert (rc, err) == (0, "")
    assert f"sweep:      {sweep} (id lr_lam)" in out
    assert f"base:       {CURVE}" in out
    assert "metric:     validation/accuracy at step 6 (max)" in out
    assert "trials:     8 = 4 configuration(s) x 2 seed(s); executor local, 1 at a time" in out
    assert f"sweep dir:  {tmp_path}/runs/sweeps/lr_lam (not created by --dry-run)" in out
    assert "  steps = 6  # <- override steps=6" in out
    trial_lines = [line for line in out.splitlines() if "  seed=" in line and not line.startswith(" ")]
    assert len(trial_lines) == 8
    assert trial_lines[0].endswith("  seed=0  optim.lr=0.001 lam=0.9 clip=0.1")
    block = out[out.index(trial_lines[3]):out.index(trial_lines[4])]  # optim.lr=0.001 lam=0.95 clip=0.2 seed=1
    assert block.splitlines()[1:] == ["    seed = 1  (was 0)"]
    block = out[out.index(trial_lines[4]):out.index(trial_lines[5])]
    assert block.splitlines()[1:] == ["    optim.lr = 0.01  (was 0.001)", "    lam = 0.9  (was 0.95)",
                                      "    clip = 0.1  (was 0.2)"]
    assert "total: 8 trial(s) on this machine, 1 at a time" in out
    assert list(tmp_path.iterdir()) == [sweep]


def test_same_command_gives_the_same_ids(tmp_path, capsys):
    sweep = write_sweep(tmp_path / "s.py", BODY)
    first = dry_run(capsys, sweep)[1]
    assert dry_run(capsys, sweep, "--executor", "local")[1].splitlines()[8:] == first.splitlines()[8:]


def test_slurm_dry_run_shows_one_job_array_with_its_concurrency(tmp_path, capsys):
    sweep = write_sweep(tmp_path / "s.py", BODY)
    rc, out, _ = dry_run(capsys, sweep, "--executor", "slurm", "--max-parallel", "3", "executor.gpus_per_node=2",
                         "executor.time_minutes=30")
    assert rc == 0
    assert "executor slurm, 3 at a time" in out
    assert ("total: 8 trial(s) x 1 node(s) x 2 GPU(s) = 16 GPUs in all, at most 6 at once (array parallelism 3); at "
            "most 8.0 GPU-hours (30 min limit each)") in out
    assert "#SBATCH --array=0-7%3" in out and "#SBATCH --job-name=s" in out
    assert f"{tmp_path}/runs/sweeps/s/slurm/%A_%a_0_log.out" in out or "runs/sweeps/s/slurm/%A_%a_0_log.out" in out
    # trials get their own Ray ports, so two on one node do not collide
    assert "    executor.ray_port = 6380  (was 6379)" in out and "    executor.ray_port = 6386  (was 6379)" in out


@pytest.mark.parametrize("body, extra, message", [
    (BODY.replace('"optim.lr"', '"optim.lrr"'), [],
     "sweep axis: Optim takes no argument 'lrr' (config path 'optim.lrr'); did you mean 'optim.lr'?"),
    (BODY.replace('"lam"', '"lamb"'), [], "sweep axis: CurveExperiment takes no argument 'lamb'"),
    (BODY.replace("[0.9, 0.95]", "[0.9, 1.5]"), [], "): lam must be in [0, 1], got 1.5"),
    (BODY.replace("[1e-3, 1e-2]", "[1e-3, 'fast']"), [],
     "optim.lr='fast' lam=0.9 clip=0.1 seed=0): config path 'optim.lr' takes a number (now 0.001), got 'fast'"),
    (BODY, ["steps=0"], "the sweep's base (" + str(CURVE) + "): steps must be >= 1, got 0"),
    (BODY.replace('overrides=["steps=6"]', 'overrides=["stepz=6"]'), [], "did you mean 'steps'?"),
    (BODY + "budget=Budget(max_trials=5),", [], "the sweep has 8 trials, over its budget of 5"),
    (BODY + "budget=Budget(max_gpu_hours=1),", ["--executor", "slurm", "executor.gpus_per_node=8"],
     "the sweep may use up to 256 GPU-hours (trials × GPUs × time limit), over its budget of 1"),
    (BODY.replace('step=6', 'step=-1'), [], "Sweep: step must be an int >= 0"),
    (BODY.replace('metric="validation/accuracy", ', 'mode="best", metric="validation/accuracy", '), [],
     "Sweep: mode must be 'max' or 'min', got 'best'"),
    (BODY, ["--max-parallel", "0"], "--max-parallel must be >= 1, got 0"),
    (BODY, ["--executor", "debug"], "argument --executor: invalid choice: 'debug'"),
])
def test_every_trial_is_validated_before_anything_exists(tmp_path, capsys, body, extra, message):
    sweep = write_sweep(tmp_path / "bad.py", body)
    rc, out, err = dry_run(capsys, sweep, *extra)
    assert rc == 2 and out == ""
    assert err.startswith("launch.py: ") and message in err and err.count("\n") == 1, err
    rc, out, err = run_launch(str(sweep), *extra, cwd=tmp_path)
    assert rc == 2 and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]


SEARCH = '''
search=Search({"optim.lr": LogUniform(1e-4, 1e-1), "lam": Uniform(0.8, 1.0), "steps": IntUniform(4, 6),
               "clip": Choice([0.1, 0.2, 0.3])}, n_trials=5),
seeds=[0, 1],
metric="validation/accuracy", step=4,
'''


def test_a_search_dry_run_shows_the_space_with_its_bounds_validated(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sweep = write_sweep(tmp_path / "search.py", SEARCH)
    rc, out, err = dry_run(capsys, sweep)
    assert (rc, err) == (0, "")
    assert ("trials:     up to 10 = 5 configuration(s) chosen by the study x 2 seed(s); executor local, 1 at a "
            "time") in out
    block = out[out.index("== search"):out.index("== trials")].splitlines()
    assert block[0] == (f"== search: tpe sampler (seed 0), study in journal:{tmp_path}/runs/sweeps/search/"
                        "study.journal; each bound below was prepared like a trial's override")
    assert block[1:5] == ["  optim.lr: LogUniform [0.0001, 0.1], log", "  lam: Uniform [0.8, 1.0]",
                          "  steps: IntUniform [4, 6]", "  clip: Choice([0.1, 0.2, 0.3])"]
    assert list(tmp_path.iterdir()) == [sweep]


def test_a_slurm_search_dry_run_shows_one_array_of_n_trials_elements_and_one_seed_each(tmp_path, capsys):
    one_seed = write_sweep(tmp_path / "s.py", SEARCH.replace("seeds=[0, 1]", "seeds=[0]"))
    rc, out, err = dry_run(capsys, one_seed, "--executor", "slurm", "--max-parallel", "2", "--run-dir", tmp_path / "d")
    assert (rc, err) == (0, "")
    assert "#SBATCH --array=0-4%2" in out  # one element per configuration the study will choose
    two_seeds = write_sweep(tmp_path / "s2.py", SEARCH)
    rc, out, err = dry_run(capsys, two_seeds, "--executor", "slurm", "--run-dir", tmp_path / "d")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "a Search on SLURM runs one seed per configuration" in err and "got seeds=[0, 1]" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.py", "s2.py"]


@pytest.mark.parametrize("old, new, message", [
    ("Uniform(0.8, 1.0)", "Uniform(0.9, 0.9)", "Search: Uniform for 'lam' needs low < high, got (0.9, 0.9)"),
    ("Uniform(0.8, 1.0)", "Uniform(1.0, 0.8)", "Search: Uniform for 'lam' needs low < high, got (1.0, 0.8)"),
    ("LogUniform(1e-4, 1e-1)", "LogUniform(0.0, 1e-1)", "Search: LogUniform for 'optim.lr' needs 0 < low < high"),
    ("IntUniform(4, 6)", "IntUniform(6, 4)", "Search: IntUniform for 'steps' needs ints low <= high, got (6, 4)"),
    ("n_trials=5", "n_trials=5, sampler='bayes'", "Search: unknown sampler 'bayes'; choose one of tpe, random, grid, "
                                                   "cmaes"),
    ("n_trials=5", "n_trials=5, storage='sqlite:////no/such/dir/study.db'",
     "Search: cannot open the study storage sqlite:////no/such/dir/study.db: unable to open database file"),
    ("Uniform(0.8, 1.0)", "Uniform(0.8, 1.5)", "Search bounds (optim.lr=0.1 lam=1.5 steps=6 clip=0.2): lam must be "
                                               "in [0, 1], got 1.5"),
    ('"lam"', '"lamb"', "sweep axis: CurveExperiment takes no argument 'lamb'"),
    ("search=", 'axes=[Grid({"seed": [1]})], search=', "Sweep: a Search chooses every swept path; give the sweep no "
                                                       "axes"),
])
def test_a_bad_search_is_one_line_before_anything_exists(tmp_path, capsys, old, new, message):
    sweep = write_sweep(tmp_path / "bad.py", SEARCH.replace(old, new, 1))
    rc, out, err = dry_run(capsys, sweep)
    assert rc == 2 and out == ""
    assert err.startswith("launch.py: ") and message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py"]


def test_sweep_file_errors(tmp_path, capsys):
    missing = write_sweep(tmp_path / "nobase.py", 'metric="m", step=1', base=tmp_path / "nowhere.py")
    rc, _, err = dry_run(capsys, missing)
    assert rc == 2 and f"base experiment {tmp_path}/nowhere.py not found" in err
    not_a_sweep = tmp_path / "dict.py"
    not_a_sweep.write_text("SWEEP = {'base': 'x.py'}\n")
    message = f"launch.py: {not_a_sweep}: SWEEP must be ppo.sweep.Sweep(...), got dict\n"
    assert dry_run(capsys, not_a_sweep)[2] == message
    on_sweep = write_sweep(tmp_path / "meta.py", 'metric="m", step=1', base=missing)
    assert "is itself a sweep file" in dry_run(capsys, on_sweep)[2]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["clip", "gae_lambda", "length_adaptive_alpha", "tiny_cpu_lambda", "tiny_cpu_search",
                                  "qwen2p5_1p5b_gsm8k_search"])
def test_every_shipped_sweep_dry_runs(name, monkeypatch, capsys):
    """The sweep files in ``sweeps/`` expand and validate every trial (GPU ones against their SLURM executor)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    rc, out, err = dry_run(capsys, root / "sweeps" / f"{name}.py")
    assert (rc, err) == (0, "")
    assert f"sweep:      {root / 'sweeps' / name}.py" in out


@pytest.mark.slow
def test_the_gpu_search_is_one_array_of_24_elements_within_its_gpu_budget(monkeypatch, capsys):
    """``sweeps/qwen2p5_1p5b_gsm8k_search.py``: TPE over λ_value, the clip ratios and α, every bound prepared against
    the recipe; 24 one-node elements, 8 at a time, 24 × 8 GPUs × 4 h = 768 GPU-hours, its budget."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    rc, out, err = dry_run(capsys, root / "sweeps" / "qwen2p5_1p5b_gsm8k_search.py")
    assert (rc, err) == (0, "")
    block = out[out.index("== search"):out.index("== trials")].splitlines()
    assert block[0].startswith("== search: tpe sampler (seed 0), study in journal:")
    assert block[1:5] == ["  advantage.lam_value: Uniform [0.9, 1.0]", "  policy.loss.clip_low: Uniform [0.1, 0.3]",
                          "  policy.loss.clip_high: Uniform [0.15, 0.4]",
                          "  advantage.length_adaptive_alpha: LogUniform [0.01, 0.2], log"]
    assert "#SBATCH --array=0-23%8" in out and "#SBATCH --gpus-per-node=8" in out
    assert "192 GPUs in all, at most 64 at once (array parallelism 8); at most 768.0 GPU-hours" in out


def test_no_shipped_sweep_is_left_out():
    from pathlib import Path

    shipped = {p.stem for p in (Path(__file__).resolve().parents[2] / "sweeps").glob("*.py")} - {"__init__"}
    assert shipped == {"clip", "gae_lambda", "length_adaptive_alpha", "tiny_cpu_lambda", "tiny_cpu_search",
                       "qwen2p5_1p5b_gsm8k_search"}
