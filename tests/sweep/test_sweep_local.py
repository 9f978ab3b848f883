"""Local sweeps end to end on the light ``recipes/curve.py``: trials as processes, early stopping that kills process
trees, a failing trial that does not stop the sweep, resume, Ctrl-C, adoption, the one-driver lock."""

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from ppo.metrics import read_records
from ppo.sweep.local import LocalTrials
from ppo.sweep.state import DONE
from tests.sweep.conftest import CURVE, REPO, run_launch, state, write_sweep
from tests.waiting import wait_for

MIXED = '''
axes=[Points([
    {"optim.lr": 1e-3},
    {"optim.lr": 1e-2},
    {"optim.lr": 0.3},
    {"diverge_at": 3},
    {"fail_at": 4},
    {"diverge_at": 5, "child": True},
])],
overrides=["steps=8", "step_s=0.3"],
metric="validation/accuracy", step=8,
stopping=EarlyStopping(gates=['data["train/reward"]["3"] > 0.1'],
                       divergence=Divergence(non_finite=["train/loss"])),
poll_s=30,
'''


def by_point(trials: dict) -> dict:
    return {json.dumps(r["point"], sort_keys=True): r for r in trials.values()}


def logged(run_dir) -> list[int]:
    log = run_dir / "metrics.jsonl"
    return [r["step"] for r in read_records(log)] if log.exists() else []


@pytest.mark.slow
def test_local_sweep_runs_stops_records_failures_and_resumes(tmp_path):
    sweep = write_sweep(tmp_path / "mixed.py", MIXED)
    sweep_dir = tmp_path / "sweep"
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), "--max-parallel", "3", cwd=tmp_path,
                              timeout=120)
    assert rc == 1, out + err  # one trial failed; the sweep went on
    trials = by_point(state(sweep_dir))
    outcome = {p: (r["state"], r["reason"]) for p, r in trials.items()}
    assert outcome['{"optim.lr": 0.001}'] == ("done", None)
    assert outcome['{"optim.lr": 0.01}'] == ("done", None)
    assert outcome['{"optim.lr": 0.3}'][0] == "stopped"
    assert outcome['{"optim.lr": 0.3}'][1].startswith('gate failed: data["train/reward"]["3"] > 0.1 (false: 0.09')
    assert outcome['{"diverge_at": 3}'] == ("stopped", "diverged: train/loss is nan at step 3")
    assert outcome['{"fail_at": 4}'] == ("failed", "RuntimeError: curve failure at step 4")
    assert outcome['{"child": true, "diverge_at": 5}'] == ("stopped", "diverged: train/loss is nan at step 5")
    # stopped trials ended within one step (0.3 s) of the step that decided it, although the sweep polls every 30 s,
    # and their whole process tree is gone
    for point, decided in (('{"diverge_at": 3}', 3), ('{"child": true, "diverge_at": 5}', 5), ('{"optim.lr": 0.3}', 3)):
        run_dir = sweep_dir / trials[point]["run_dir"]
        last = max(r["step"] for r in read_records(run_dir / "metrics.jsonl"))
        assert trials[point]["stop_step"] == decided and last - decided == trials[point]["overrun"] <= 1
        assert not psutil.pid_exists(trials[point]["jobs"][-1]["pid"])
    child = int((sweep_dir / trials['{"child": true, "diverge_at": 5}']["run_dir"] / "child.pid").read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    # every trial is a normal run directory: launch.py status works on it
    done_dir = sweep_dir / trials['{"optim.lr": 0.001}']["run_dir"]
    assert {"config.json", "config.txt", "overrides.txt", "launch.json", "job.json", "status.json",
            "metrics.jsonl"} <= {p.name for p in done_dir.iterdir()}
    assert (done_dir / "overrides.txt").read_text() == "steps=8\nstep_s=0.3\noptim.lr=0.001\nseed=0\n"
    assert json.loads((done_dir / "launch.json").read_text())["sweep"]["id"] == "mixed"
    rc, status_line, _ = run_launch("status", str(done_dir))
    assert rc == 0 and status_line.endswith("COMPLETED\n")
    assert "[sweep mixed]" in out and "5 trial(s)" not in out

    # the same command again: finished trials are skipped, the failed one resumes from its checkpoint
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), "--max-parallel", "3", cwd=tmp_path,
                              timeout=120)
    assert rc == 0, out + err
    assert "5 trial(s) already finished; skipping them" in out
    again = by_point(state(sweep_dir))
    assert {p: r["attempts"] for p, r in again.items()} == {p: 2 if p == '{"fail_at": 4}' else 1 for p in again}
    assert again['{"fail_at": 4}']["state"] == DONE
    records = read_records(sweep_dir / again['{"fail_at": 4}']["run_dir"] / "metrics.jsonl")
    assert [(r["step"], r["attempt"]) for r in records] == [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2), (7, 2),
                                                             (8, 2)]
    assert [h["state"] for h in again['{"fail_at": 4}']["history"]] == ["pending", "running", "failed", "running",
                                                                        "done"]


SLOW = '''
axes=[Grid({"lam": [0.9, 0.95]})],
overrides=["steps=60", "step_s=0.25"],
metric="train/reward", step=60,
poll_s=0.3,
'''


@pytest.mark.slow
def test_ctrl_c_stops_local_trials_and_the_next_run_resumes_them(tmp_path):
    sweep = write_sweep(tmp_path / "slow.py", SLOW)
    sweep_dir = tmp_path / "sweep"
    argv = [sys.executable, str(REPO / "launch.py"), str(sweep), "--run-dir", str(sweep_dir), "--max-parallel", "2"]
    # Ctrl-C as a terminal delivers it, even when the tests themselves run in the background (`cmd &` in a script
    # starts with SIGINT ignored, children inherit that, and Python then installs no KeyboardInterrupt handler)
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(lambda: (sweep_dir / "state.json").exists()
                 and sum(r["state"] == "running" for r in state(sweep_dir).values()) == 2, 60, "two running trials",
                 poll_s=0.2)
        wait_for(lambda: all(logged(sweep_dir / r["run_dir"]) for r in state(sweep_dir).values()), 30,
                 "metrics from both trials", poll_s=0.2)
        # one driver per sweep
        rc, _, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), cwd=tmp_path)
        assert rc == 2 and f"sweep {sweep_dir} is being run by pid {driver.pid}" in err
        pids = [r["pid"] for r in state(sweep_dir).values()]
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 1, out + err
    assert "interrupted; running trials were stopped" in out
    trials = state(sweep_dir)
    assert {r["state"] for r in trials.values()} == {"failed"}
    assert all(r["reason"].startswith("interrupted: the sweep driver was stopped") for r in trials.values())
    assert not any(psutil.pid_exists(p) for p in pids)
    reached = {t: max(logged(sweep_dir / rec["run_dir"])) for t, rec in trials.items()}
    # the same command again: the same trials (same ids) pick up where they stopped
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), "--max-parallel", "2", "--poll-s", "0.2",
                              cwd=tmp_path, timeout=120)
    assert rc == 0, out + err
    for trial_id, record in state(sweep_dir).items():
        steps = [r["step"] for r in read_records(sweep_dir / record["run_dir"] / "metrics.jsonl")]
        assert steps == list(range(1, 61)) and record["attempts"] == 2
        assert reached[trial_id] < 60


@pytest.mark.slow
def test_a_trial_left_running_by_a_dead_driver_is_adopted(tmp_path):
    run_dir = tmp_path / "run"
    rc, _, err = run_launch(str(CURVE), "--run-dir", str(run_dir), "steps=4", "step_s=0.5", cwd=tmp_path)
    assert rc == 0, err
    (run_dir / "metrics.jsonl").unlink()  # so the job runs its 2 s again
    first = LocalTrials()
    pid = first.start("t1", run_dir)
    later = LocalTrials()
    assert not later.adopt("t1", os.getpid(), run_dir)  # a live process, but not that run's job
    assert later.adopt("t1", pid, run_dir)
    assert later.poll("t1") is None
    assert wait_for(lambda: later.poll("t1"), 30, "the adopted job to end", poll_s=0.2) == ("done", None)
    assert first.poll("t1") == ("done", None)


@pytest.mark.slow
def test_a_sweep_directory_belongs_to_one_sweep(tmp_path):
    one = write_sweep(tmp_path / "one.py", 'overrides=["steps=1"], metric="train/reward", step=1')
    two = write_sweep(tmp_path / "two.py", 'overrides=["steps=1"], metric="train/reward", step=1')
    rc, out, err = run_launch(str(one), "--run-dir", str(tmp_path / "sweep"), cwd=tmp_path)
    assert rc == 0, out + err
    rc, _, err = run_launch(str(two), "--run-dir", str(tmp_path / "sweep"), cwd=tmp_path)
    assert (rc, err) == (2, f"launch.py: {tmp_path}/sweep holds sweep 'one', not 'two'; choose another --run-dir\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    rc, _, err = run_launch(str(two), "--run-dir", str(tmp_path / "other"), cwd=tmp_path)
    assert rc == 2 and "exists and is not a sweep directory" in err
