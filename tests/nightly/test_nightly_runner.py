"""analysis/nightly.py run / record / baseline end to end: the real launch.py runs the stand-in experiment
(tests/nightly/stand_in.py), through tests/nightly/fake_launch.py for the SLURM path; one cluster test trains for real,
as the GPU suite's first entry with the tiny recipe standing in, on the SLURM test cluster."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.cluster.ports import free_port
from ppo.metrics import read_metrics_log
from ppo.nightly.history import KEY_METRICS, load_history, read_record
from ppo.nightly.run_facts import read_run_dir
from ppo.nightly.suite import load_suite
from tests.nightly.conftest import REPO, fake_launcher, launch_stand_in, run_cli, write_experiment
from tests.nightly.stand_in import CHECKS, STEP

NIGHT = "2025-06-01"


def write_suite(path: Path, entries: list) -> Path:
    path.write_text(json.dumps(entries))
    return path


def run_night(tmp_path: Path, suite: Path, *extra: object, night: str = NIGHT) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "nightly.py", "run", suite, "--history", tmp_path / "history", "--runs-dir", tmp_path / "runs",
        "--night", night, *extra,
    )


def run_slurm_night(tmp_path: Path, suite: Path) -> subprocess.CompletedProcess[str]:
    return run_night(tmp_path, suite, "--executor", "slurm", "--launcher", fake_launcher())


def head_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def launched_versions(run_dir: Path) -> dict[str, str]:
    recorded = json.loads((run_dir / "versions.json").read_text())
    return {k: v for k, v in recorded.items() if v is not None}


def night_records(tmp_path: Path, night: str = NIGHT) -> dict:
    return {r.recipe: r for r in load_history(tmp_path / "history").records if r.night == night}


@pytest.fixture(scope="module")
def mixed_night(tmp_path_factory):
    """One night of five entries (one of each verdict's causes): ``(finished process, records, root, experiment)``."""
    tmp_path = tmp_path_factory.mktemp("mixed")
    experiment = write_experiment(tmp_path / "exp_fake.py")
    suite = write_suite(tmp_path / "suite.json", [
        {"experiment": str(experiment), "name": "good", "overrides": [f"trainer.max_steps={STEP}"]},
        {"experiment": str(experiment), "name": "regressed",
         "overrides": [f"trainer.max_steps={STEP}", "fake.quality=0.4"]},
        {"experiment": str(experiment), "name": "died", "overrides": [f"trainer.max_steps={STEP}", "fake.stop_at=12"]},
        {"experiment": str(experiment), "name": "badcfg", "overrides": ["policy.optimizer.lr=-1"]},
        {"experiment": str(experiment), "name": "short", "overrides": ["trainer.max_steps=10"]},
    ])
    done = run_night(tmp_path, suite)
    return done, night_records(tmp_path), tmp_path, experiment


@pytest.mark.slow
def test_each_entry_is_judged_and_launch_failures_are_infra_fail(mixed_night):
    done, records, _, _ = mixed_night
    assert done.returncode == 3, done.stderr
    assert {name: r.status for name, r in records.items()} == {
        "good": "PASS", "regressed": "FAIL", "died": "INFRA-FAIL", "badcfg": "INFRA-FAIL", "short": "INFRA-FAIL",
    }
    assert records["regressed"].reason == ""
    assert [c["status"] for c in records["regressed"].checks] == ["FAIL", "PASS", "PASS", "PASS"]
    assert records["regressed"].checks[0]["value"] < 0.6
    assert records["died"].reason == (
        "launcher exited 1 (the job failed): RuntimeError: worker on node 0 died at step 13"
    )
    assert records["died"].last_step == 12
    assert records["badcfg"].reason == (
        "launcher exited 2 (bad command line or config): launch.py: policy.optimizer.lr must be > 0, got -1.0"
    )
    assert records["badcfg"].curves == {} and records["badcfg"].last_step is None
    assert records["short"].reason == f"the run stopped at step 10; the checks need step {STEP}"
    assert "1 PASS, 1 FAIL, 3 INFRA-FAIL" in done.stdout


@pytest.mark.slow
def test_record_holds_what_the_run_directory_says(mixed_night):
    _, records, tmp_path, experiment = mixed_night
    record = records["good"]
    run_dir = Path(record.run_dir)
    assert run_dir == (tmp_path / "runs" / NIGHT / "good").resolve()
    assert record.experiment == str(experiment) and record.overrides == [f"trainer.max_steps={STEP}"]
    assert record.launch["exit_code"] == 0 and record.executor == "local"
    launched = json.loads((run_dir / "launch.json").read_text())
    assert record.git_commit == launched["git_commit"] == head_commit()
    assert record.git_dirty == (launched["git_dirty"] if record.git_commit else None)
    assert record.config_text == (run_dir / "config.txt").read_text()
    assert "fake.quality = 0.4  # <- override fake.quality=0.4 (was 0.8)" in records["regressed"].config_text
    assert record.versions == launched_versions(run_dir) and "fiddle" in record.versions
    assert record.step_needed == STEP and record.last_step == STEP and record.wall_time_s >= 0
    assert set(record.curves) == set(KEY_METRICS)
    assert record.curves == {m: s for m, s in read_metrics_log(run_dir / "metrics.jsonl").items() if m in KEY_METRICS}
    assert [c["check"] for c in record.checks] == CHECKS
    assert (run_dir.parent / "good.stdout.log").exists() and (run_dir.parent / "good.stderr.log").exists()


@pytest.mark.slow
def test_the_launcher_gets_the_documented_command_line_and_slurm_jobs_are_followed(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [{
        "experiment": str(experiment), "overrides": ["trainer.max_steps=20", "policy.optimizer.lr=1e-6"],
        "launch_args": ["--fiddler", "raw_reward"],
    }])
    done = run_slurm_night(tmp_path, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "runs" / NIGHT / "exp_fake"
    assert json.loads((run_dir / "argv.json").read_text()) == [
        str(experiment), "trainer.max_steps=20", "policy.optimizer.lr=1e-6", "--fiddler", "raw_reward",
        "--executor", "slurm", "--yes", "--run-dir", str(run_dir),
    ]
    assert "advantage = 'raw_reward'  # <- --fiddler raw_reward" in (run_dir / "config.txt").read_text()
    record = night_records(tmp_path)["exp_fake"]
    assert record.executor == "slurm" and record.status == "PASS"
    assert f"{run_dir}: SLURM job 42 COMPLETED" in (run_dir.parent / "exp_fake.stdout.log").read_text()


@pytest.mark.slow
def test_a_failed_slurm_job_is_infra_fail_with_its_status_line(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [{"experiment": str(experiment), "overrides": ["fake.stop_at=7"]}])
    assert run_slurm_night(tmp_path, suite).returncode == 3
    record = night_records(tmp_path)["exp_fake"]
    run_dir = tmp_path / "runs" / NIGHT / "exp_fake"
    assert record.reason == (
        f"the SLURM job did not complete: {run_dir}: SLURM job 42 FAILED: RuntimeError: worker on node 0 died at step 8"
    )


@pytest.mark.slow
def test_a_slurm_job_past_its_timeout_is_cancelled(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [
        {"experiment": str(experiment), "overrides": ["fake.slurm_hang=True"], "timeout_s": 8},
    ])
    assert run_slurm_night(tmp_path, suite).returncode == 3
    record = night_records(tmp_path)["exp_fake"]
    assert "timeout" in record.reason and "cancelled" in record.reason
    assert (tmp_path / "runs" / NIGHT / "exp_fake" / "fake_slurm_state").read_text() == "CANCELLED"


@pytest.mark.slow
def test_exit_codes_follow_the_worst_verdict(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [
        {"experiment": str(experiment), "name": "good"},
        {"experiment": str(experiment), "name": "regressed", "overrides": ["fake.quality=0.4"]},
    ])
    assert run_night(tmp_path, suite, "--only", "good").returncode == 0
    assert run_night(tmp_path, suite, night="2025-06-02").returncode == 1


@pytest.mark.slow
def test_a_launch_past_its_timeout_is_killed_and_infra_fail(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [
        {"experiment": str(experiment), "overrides": ["fake.sleep=60"], "timeout_s": 1},
    ])
    done = run_night(tmp_path, suite)
    assert done.returncode == 3
    record = night_records(tmp_path)["exp_fake"]
    assert record.status == "INFRA-FAIL" and "timeout" in record.reason
    assert record.wall_time_s < 30


@pytest.mark.slow
def test_a_refused_launch_falls_back_to_the_checkout(mixed_night):
    """launch.py refused the config, so no run directory: the commit and versions are this checkout's."""
    record = mixed_night[1]["badcfg"]
    assert not Path(record.run_dir).exists()
    assert record.git_commit == head_commit()
    assert record.git_dirty in ((True, False) if record.git_commit else (None,))
    assert record.config_text is None and record.config_hash is None and record.wandb_url is None
    assert {"python", "ppo", "fiddle"} <= set(record.versions)


@pytest.mark.slow
def test_a_launcher_that_cannot_start_is_infra_fail(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [str(experiment)])
    done = run_cli("nightly.py", "run", suite, "--history", tmp_path / "history", "--runs-dir", tmp_path / "runs",
                   "--launcher", str(tmp_path / "no-such-launcher"), "--night", NIGHT)
    assert done.returncode == 3
    assert night_records(tmp_path)["exp_fake"].reason.startswith("cannot start")


def test_a_bad_suite_launches_nothing(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [
        str(experiment), {"experiment": str(experiment), "name": "typo", "checks": ["max(data[\"m\"]) <> 1"]},
    ])
    done = run_night(tmp_path, suite)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "entry 2 (typo): check 1" in done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "history").exists()


def test_unknown_only_is_a_usage_error(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [str(experiment)])
    done = run_night(tmp_path, suite, "--only", "exp_fak")
    assert done.returncode == 2 and "did you mean 'exp_fake'?" in done.stderr


@pytest.mark.slow
def test_a_rerun_the_same_night_gets_a_fresh_run_dir_and_supersedes(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [str(experiment)])
    assert run_night(tmp_path, suite).returncode == 0
    assert run_night(tmp_path, suite).returncode == 0
    record = night_records(tmp_path)["exp_fake"]
    assert Path(record.run_dir).name == "exp_fake-2"
    assert len(list((tmp_path / "history" / "nights" / NIGHT / ".superseded").iterdir())) == 1


@pytest.mark.slow
def test_run_dir_facts_from_launch_py_files(tmp_path):
    run_dir = launch_stand_in(tmp_path / "run")
    facts = read_run_dir(run_dir)
    launched = json.loads((run_dir / "launch.json").read_text())
    assert (facts.git_commit, facts.git_dirty) == (
        (launched["git_commit"], launched["git_dirty"]) if launched["git_commit"] else (None, None)
    )
    assert facts.versions == launched_versions(run_dir) and None not in facts.versions.values()
    assert (facts.job_state, facts.job_error, facts.wandb_url) == ("COMPLETED", None, None)
    assert facts.config_text == (run_dir / "config.txt").read_text() and facts.last_step == STEP
    sink = {"id": "abc123", "mode": "online", "project": "ppo", "group": None, "dir": str(run_dir)}
    (run_dir / "wandb.json").write_text(json.dumps({**sink, "url": "https://wandb.example/team/ppo/runs/abc123"}))
    assert read_run_dir(run_dir).wandb_url == "https://wandb.example/team/ppo/runs/abc123"
    (run_dir / "wandb.json").write_text(json.dumps({**sink, "mode": "offline", "url": None}))
    (run_dir / "versions.json").write_text("{not json")
    (run_dir / "launch.json").unlink()
    facts = read_run_dir(run_dir)
    assert (facts.git_commit, facts.git_dirty, facts.versions, facts.wandb_url) == (None, None, None, None)


# ---- record --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_record_from_an_existing_run_directory(tmp_path, experiment):
    run_dir = launch_stand_in(tmp_path / "run")
    done = run_cli("nightly.py", "record", run_dir, "--recipe", "tiny_cpu", "--history", tmp_path / "h",
                   "--night", "2025-05-30", "--experiment", experiment, "--wandb-url", "https://wandb.example/r/1")
    assert done.returncode == 0, done.stderr
    assert "tiny_cpu 2025-05-30: PASS" in done.stdout
    record = read_record(tmp_path / "h" / "nights" / "2025-05-30" / "tiny_cpu.json")
    assert record.git_commit == head_commit() and record.launch is None
    assert record.wandb_url == "https://wandb.example/r/1"
    assert record.last_step == STEP and list(record.curves["validation/accuracy"]) == ["0", "5", "10", "15", "20"]
    assert "timing/train/total" not in record.curves
    assert [c["status"] for c in record.checks] == ["PASS"] * 4


@pytest.mark.slow
def test_record_with_explicit_checks_and_a_default_night(tmp_path):
    run_dir = launch_stand_in(tmp_path / "run", "trainer.max_steps=10")
    done = run_cli("nightly.py", "record", run_dir, "--recipe", "r", "--history", tmp_path / "h",
                   "--check", 'data["train/reward"]["20"] > 0.5', "--commit", "d" * 40)
    assert done.returncode == 3, done.stdout + done.stderr
    (record,) = load_history(tmp_path / "h").records
    assert record.status == "INFRA-FAIL" and "has no step '20'" in record.reason
    assert record.git_commit == "d" * 40 and len(record.night) == 10


@pytest.mark.slow
def test_record_without_checks_or_metrics(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run_cli("nightly.py", "record", tmp_path / "empty", "--recipe", "r", "--history", tmp_path / "h",
                   "--night", "n1")
    assert done.returncode == 3
    assert load_history(tmp_path / "h").records[0].reason.startswith("no metrics.jsonl")
    assert run_cli("nightly.py", "record", tmp_path / "absent", "--recipe", "r", "--history", tmp_path / "h"
                   ).returncode == 2


# ---- baseline ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_baseline_band_matches_the_seed_runs(tmp_path, experiment):
    suite = write_suite(tmp_path / "suite.json", [
        {"experiment": str(experiment), "name": "tiny", "overrides": ["trainer.max_steps=10", "seed=99"]},
    ])
    done = run_cli("nightly.py", "baseline", "tiny", "--suite", suite, "--seeds", 3, "--history", tmp_path / "h",
                   "--runs-dir", tmp_path / "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    baseline = load_history(tmp_path / "h").baselines["tiny"]
    assert baseline.seeds == [0, 1, 2] and all(r["used"] for r in baseline.runs)
    run_dirs = [tmp_path / "runs" / "baseline" / "tiny" / f"seed-{s}" for s in range(3)]
    for seed, run_dir in enumerate(run_dirs):
        argv = json.loads((run_dir / "launch.json").read_text())["argv"]
        assert argv[1:3] == ["trainer.max_steps=10", f"seed={seed}"]
    raw = [[json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()] for d in run_dirs]
    reward = baseline.metrics["train/reward"]
    assert reward["step"] == list(range(1, 11)) and reward["n"] == [3] * 10
    for i, step in enumerate(reward["step"]):
        values = [next(r["train/reward"] for r in run if r["step"] == step) for run in raw]
        assert reward["mean"][i] == pytest.approx(statistics.fmean(values))
        assert reward["std"][i] == pytest.approx(statistics.stdev(values))
        assert (reward["min"][i], reward["max"][i]) == (min(values), max(values))
    assert len(set(reward["mean"])) > 1 and all(s > 0 for s in reward["std"])
    assert set(baseline.metrics) == set(KEY_METRICS)


@pytest.mark.slow
def test_baseline_from_an_experiment_file_skips_failed_seeds(tmp_path, experiment):
    done = run_cli("nightly.py", "baseline", experiment, "--seeds", 3, "--history", tmp_path / "h",
                   "--runs-dir", tmp_path / "runs",
                   "--override", "fake.fail_seed=1", "--override", "trainer.max_steps=5", "--first-seed", 0)
    assert done.returncode == 1, done.stdout + done.stderr
    baseline = load_history(tmp_path / "h").baselines["exp_fake"]
    assert [r["used"] for r in baseline.runs] == [True, False, True]
    assert "seed 1 hit a broken node" in baseline.runs[1]["problem"]
    assert baseline.metrics["train/reward"]["n"] == [2] * 5


@pytest.mark.slow
def test_baseline_with_no_usable_seed_writes_nothing(tmp_path, experiment):
    done = run_cli("nightly.py", "baseline", experiment, "--seeds", 1, "--history", tmp_path / "h",
                   "--runs-dir", tmp_path / "runs", "--override", "policy.optimizer.lr=-1")
    assert done.returncode == 3 and "no baseline written" in done.stderr
    assert not (tmp_path / "h" / "baselines").exists()


# ---- the real launcher ---------------------------------------------------------------------------------------------


def _real_launcher_refusal() -> str | None:
    """launch.py's own words when it says it cannot run experiments yet, else None."""
    done = subprocess.run(
        [sys.executable, "launch.py", "experiments/tiny_cpu.py", "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    if done.returncode == 2 and "cannot run" in done.stderr:
        return done.stderr.strip()
    return None


@pytest.mark.slow
@pytest.mark.cluster
def test_a_short_gpu_night_on_slurm_with_the_tiny_recipe_standing_in(cluster, tmp_path, monkeypatch):
    """nightly_suite_gpu.py's first entry, its name and gates, with experiments/tiny_cpu.py standing in for the GPU
    recipe: the real launch.py submits it to the SLURM test cluster (one node, no GPU), the runner follows the job
    with ``launch.py status --wait`` and judges the run with the GPU gates."""
    refusal = _real_launcher_refusal()
    if refusal:
        pytest.skip(f"launch.py cannot run experiments yet: {refusal}")
    monkeypatch.chdir(REPO)  # a suite's experiment paths are relative to the repository root
    gpu = load_suite("nightly_suite_gpu.py")[0]
    steps = 2
    suite = write_suite(tmp_path / "suite.json", [{
        "experiment": "experiments/tiny_cpu.py",
        "name": gpu.name,
        "overrides": [f"trainer.max_steps={steps}", "trainer.warm_start_steps=2", "trainer.val_period=1",
                      "trainer.checkpoint_period=100",
                      "executor.nodes=1", "executor.gpus_per_node=0", "executor.partition=debug",
                      "executor.time_minutes=5", "executor.signal_delay_s=60", "executor.ray_loopback_base=80",
                      f"executor.ray_port={free_port()}", "executor.ray_join_timeout_s=90",
                      "executor.ray_start_args=('--num-cpus=2', '--object-store-memory=200000000')"],
        "launch_args": ["--allow-dirty"],
        "step": steps,
        "checks": list(gpu.nightly.checks),
        "timeout_s": 600,
    }])
    done = run_cli("nightly.py", "run", suite, "--executor", "slurm", "--history", tmp_path / "h",
                   "--runs-dir", tmp_path / "runs", "--night", NIGHT, env=cluster.env, timeout=900)
    (record,) = load_history(tmp_path / "h").records
    run_dir = Path(record.run_dir)
    if (run_dir / "job.json").exists():
        cluster.job_ids.append(json.loads((run_dir / "job.json").read_text())["job_id"])
    assert record.status != "INFRA-FAIL", (record.reason, done.stdout[-2000:], done.stderr[-2000:])
    assert (record.recipe, record.executor) == (gpu.name, "slurm")
    assert record.launch["exit_code"] == 0 and record.last_step == steps
    status_line = (run_dir.parent / f"{run_dir.name}.stdout.log").read_text().splitlines()[-1]
    assert status_line.startswith(f"{run_dir}: SLURM job ") and status_line.endswith(" COMPLETED")
    assert [c["check"] for c in record.checks] == list(gpu.nightly.checks)
    assert all(c["value"] is not None for c in record.checks), record.checks  # every gate's metric was logged
    assert record.config_text and record.config_hash and record.git_commit
    assert "train/reward" in record.curves and math.isfinite(record.curves["train/reward"][str(steps)])
