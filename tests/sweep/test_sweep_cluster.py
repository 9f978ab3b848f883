"""Sweeps on the real 2-node SLURM test cluster (``tests/launch/slurm_cluster.py``): one submitit job array with a
concurrency limit, resume after half of it was cancelled, an early stop that cancels a running element, and a search
whose array elements each ask one journal-file study for their configuration and tell it their result (and whose
crashed elements are resubmitted).

About 5 minutes (79 + 53 + 54 + 58 s measured here): each trial is a 1-node SLURM job that starts a Ray head and runs
``recipes/curve.py`` for 6-15 s.
"""

import json
import os
import subprocess
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from ppo.cluster.ports import free_port
from ppo.metrics import read_records
from tests.sweep.conftest import run_launch, state, write_sweep
from tests.sweep.recipes.curve import reward
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster


def slurm_args(loopback: int) -> list[str]:
    return ["--executor", "slurm", "--yes", "--allow-dirty", "executor.nodes=1", "executor.gpus_per_node=0",
            "executor.partition=debug", "executor.time_minutes=5", "executor.signal_delay_s=60",
            f"executor.ray_loopback_base={loopback}", f"executor.ray_port={free_port()}",
            "executor.ray_start_args=('--num-cpus=1', '--object-store-memory=80000000')",
            "executor.ray_join_timeout_s=90"]


def sweep_cmd(cluster, sweep: Path, sweep_dir: Path, loopback: int, *extra: str, timeout: float = 300):
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), *slurm_args(loopback), *extra,
                              env=cluster.env, timeout=timeout, cwd=sweep_dir.parent)
    for record in (state(sweep_dir).values() if (sweep_dir / "state.json").exists() else []):
        cluster.job_ids += [j["job_id"].split("_")[0] for j in record["jobs"]]
    return rc, out, err


def squeue(cluster, *argv: str) -> str:
    return subprocess.run(["squeue", "-h", *argv], env={**os.environ, **cluster.env}, capture_output=True,
                          text=True, timeout=30, check=True).stdout


def scancel(cluster, job_id: str) -> None:
    subprocess.run(["scancel", job_id], env={**os.environ, **cluster.env}, check=True, timeout=30)


def steps_logged(sweep_dir: Path, record: dict) -> int:
    log = sweep_dir / record["run_dir"] / "metrics.jsonl"
    return max((r["step"] for r in read_records(log)), default=0) if log.exists() else 0


ARRAY = '''
axes=[Grid({"lam": [0.8, 0.9, 0.95, 1.0]})],
overrides=["steps=15", "step_s=1.0"],
metric="train/reward", step=15,
max_parallel=2,
poll_s=2,
'''


def test_a_sweep_is_one_job_array_and_resumes_after_half_of_it_was_cancelled(cluster, tmp_path):
    sweep = write_sweep(tmp_path / "array.py", ARRAY)
    sweep_dir = tmp_path / "sweep"
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 20, "--detach")
    assert rc == 0, out + err
    assert "submitted 4 trial(s) to SLURM as job array" in out and "(at most 2 at a time)" in out
    trials = state(sweep_dir)
    jobs = {t: r["jobs"][0]["job_id"] for t, r in trials.items()}
    array = {j.split("_")[0] for j in jobs.values()}
    assert len(array) == 1 and sorted(j.split("_")[1] for j in jobs.values()) == ["0", "1", "2", "3"]
    (array_id,) = array
    submitted = (sweep_dir / "slurm" / f"{array_id}_submission.sh").read_text()
    assert "#SBATCH --array=0-3%2" in submitted
    # at most 2 elements run at once
    running = wait_for(lambda: [t for t, r in trials.items() if steps_logged(sweep_dir, r) >= 3], 120,
                       "two trials to log 3 steps")
    assert len(squeue(cluster, "-t", "RUNNING", "-r").split("\n")) - 1 <= 2
    # cancel the two that run (half of the array), as a preemption or an operator would
    for trial_id in running:
        scancel(cluster, jobs[trial_id])
    wait_for(lambda: not any(jobs[t] in squeue(cluster, "-r", "-o", "%i").split() for t in running), 60,
             "the cancelled elements to end")
    reached = {t: steps_logged(sweep_dir, trials[t]) for t in running}
    assert all(0 < steps < 15 for steps in reached.values())
    # the same command again: the cancelled trials are resubmitted (a new array) and resume; the others are followed
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 20)
    assert rc == 0, out + err
    final = state(sweep_dir)
    assert {r["state"] for r in final.values()} == {"done"}
    for trial_id, record in final.items():
        records = read_records(sweep_dir / record["run_dir"] / "metrics.jsonl")
        assert [r["step"] for r in records] == list(range(1, 16))
        if trial_id in running:
            assert len(record["jobs"]) == 2 and record["jobs"][1]["job_id"].split("_")[0] != array_id
            history = [h["state"] for h in record["history"]]
            assert "failed" in history and history[-1] == "done"
            assert record["history"][history.index("failed")]["reason"] == f"SLURM job {jobs[trial_id]} CANCELLED"
            assert {r["attempt"] for r in records if r["step"] <= reached[trial_id]} == {1.0}
            assert {r["attempt"] for r in records if r["step"] > reached[trial_id]} == {2.0}
        else:
            assert [j["job_id"] for j in record["jobs"]] == [jobs[trial_id]]
        rc, line, _ = run_launch("status", str(sweep_dir / record["run_dir"]), env=cluster.env)
        assert rc == 0 and line.endswith("COMPLETED\n") and record["jobs"][-1]["job_id"] in line


STOP = '''
axes=[Points([{"lam": 0.95}, {"lam": 0.9, "diverge_at": 3}])],
overrides=["steps=12", "step_s=1.0"],
metric="train/reward", step=12,
stopping=EarlyStopping(divergence=Divergence(non_finite=["train/loss"])),
poll_s=1,
'''


def test_an_early_stop_cancels_the_running_array_element(cluster, tmp_path):
    sweep = write_sweep(tmp_path / "stop.py", STOP)
    sweep_dir = tmp_path / "sweep"
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 40)
    assert rc == 0, out + err
    final = {json.dumps(r["point"], sort_keys=True): r for r in state(sweep_dir).values()}
    good, bad = final['{"lam": 0.95}'], final['{"diverge_at": 3, "lam": 0.9}']
    assert good["state"] == "done"
    assert (bad["state"], bad["reason"]) == ("stopped", "diverged: train/loss is nan at step 3")
    assert steps_logged(sweep_dir, bad) < 12
    rc, line, _ = run_launch("status", str(sweep_dir / bad["run_dir"]), env=cluster.env)
    assert rc == 1 and f"SLURM job {bad['jobs'][0]['job_id']} CANCELLED" in line


SEARCH = '''
search=Search({"optim.lr": LogUniform(1e-4, 1e-1), "lam": Uniform(0.8, 1.0)}, n_trials=3, sampler="tpe", seed=5),
overrides=["steps=12", "step_s=1.0"],
metric="validation/accuracy", step=12,
max_parallel=2,
poll_s=2,
'''


def test_a_search_is_an_array_whose_elements_ask_and_tell_one_journal_study(cluster, tmp_path):
    sweep = write_sweep(tmp_path / "search.py", SEARCH)
    sweep_dir = tmp_path / "sweep"
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 60, "--detach")
    assert rc == 0, out + err
    assert "submitted 3 search element(s) to SLURM as job array" in out and "(at most 2 at a time)" in out
    (array_id,) = {j.split("_")[0] for j in json.loads((sweep_dir / "state.json").read_text())["elements"]}
    cluster.job_ids.append(array_id)
    wait_for(lambda: not squeue(cluster, "-r", "-o", "%i").split(), 240, "the array to end")
    # no driver ran meanwhile: the elements alone asked the study and told it their results
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "study.journal")))
    frozen = optuna.load_study(study_name="search", storage=storage).get_trials()
    assert [t.number for t in frozen] == [0, 1, 2] and {t.state for t in frozen} == {TrialState.COMPLETE}
    for t in frozen:  # the metric each trial logged at step 12, from the point the study chose
        assert t.value == pytest.approx(0.5 * reward(t.params["optim.lr"], t.params["lam"], 0, 12))
    # two at a time: the third element asked after one of the first two had told the study its result
    assert frozen[2].datetime_start >= min(frozen[0].datetime_complete, frozen[1].datetime_complete)
    # the same command again follows the claimed trials to their end: each study trial once in the sweep's state
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 60)
    assert rc == 0, out + err
    trials = state(sweep_dir)
    assert sorted(r["search"] for r in trials.values()) == [0, 1, 2]
    elements = []
    for record in trials.values():
        t = frozen[record["search"]]
        assert record["state"] == "done" and t.params == record["point"]
        job_id = record["jobs"][0]["job_id"]
        claim = json.loads((sweep_dir / "search" / f"{job_id}.json").read_text())
        assert (claim["search"], claim["trial"], claim["point"]) == (record["search"], Path(record["run_dir"]).name,
                                                                      record["point"])
        elements.append(job_id)
    assert sorted(elements) == [f"{array_id}_{i}" for i in range(3)]


CRASH = '''
search=Search({"lam": Uniform(0.8, 1.0)}, n_trials=2, sampler="random", seed=2, retries=1),
overrides=["steps=6", "step_s=1.0", "fail_at=3", "fail_attempts=1"],
metric="validation/accuracy", step=6,
max_parallel=2,
poll_s=2,
'''


def test_a_search_element_that_crashes_is_resubmitted_and_its_study_trial_completes(cluster, tmp_path):
    sweep = write_sweep(tmp_path / "crash.py", CRASH)
    sweep_dir = tmp_path / "sweep"
    rc, out, err = sweep_cmd(cluster, sweep, sweep_dir, 80)
    assert rc == 0, out + err
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "study.journal")))
    frozen = optuna.load_study(study_name="crash", storage=storage).get_trials()
    trials = state(sweep_dir)
    assert sorted(r["search"] for r in trials.values()) == [t.number for t in frozen] == [0, 1]
    for trial_id, record in trials.items():
        t = frozen[record["search"]]
        assert f"{trial_id} crashed; retrying it (1 of 1)" in out
        # the element failed at step 3; the resubmitted job resumed and completed; the driver told its metric
        assert record["state"] == "done" and record["attempts"] == 2 and len(record["jobs"]) == 2
        assert t.state == TrialState.COMPLETE
        assert t.value == pytest.approx(0.5 * reward(1e-3, t.params["lam"], 0, 6))
