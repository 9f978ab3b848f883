"""``Search``: an Optuna study chooses the configurations on the light ``recipes/curve.py``, through its journal
file in the sweep directory; the sweep's rules prune trials in the study too; a killed driver resumes the same
study without losing or repeating a trial."""

import io
import json
import signal
import subprocess
import sys

import optuna
import psutil
import pytest
from optuna.storages import JournalStorage, RetryFailedTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from ppo.metrics import read_records
from ppo.sweep.local import kill_tree
from ppo.sweep.progress import Progress, Running, progress_lines
from tests.sweep.conftest import REPO, run_launch, state, write_sweep
from tests.sweep.recipes.curve import reward
from tests.waiting import wait_for

SEARCH = '''
search=Search({"optim.lr": LogUniform(1e-4, 1e-1), "lam": Uniform(0.8, 1.0), "steps": IntUniform(4, 6)},
              n_trials=6, sampler="tpe", seed=3),
overrides=["step_s=0.3"],
metric="validation/accuracy", step=4,
stopping=EarlyStopping(rule=SuccessiveHalving(rungs=[2], eta=2, min_trials=2, metric="train/reward")),
max_parallel=2,
poll_s=30,
'''


def study_at(sweep_dir, name):
    storage = JournalStorage(JournalFileBackend(str(sweep_dir / "study.journal")))
    return optuna.load_study(study_name=name, storage=storage)


def study(sweep_dir):
    return study_at(sweep_dir, "search")


@pytest.mark.slow
def test_a_search_asks_tells_prunes_and_resumes_the_same_study_after_a_kill(tmp_path):
    sweep = write_sweep(tmp_path / "search.py", SEARCH)
    sweep_dir = tmp_path / "sweep"
    argv = [sys.executable, str(REPO / "launch.py"), str(sweep), "--run-dir", str(sweep_dir)]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:  # killed outright (no cleanup) once three configurations were asked for
        wait_for(lambda: (sweep_dir / "state.json").exists() and len(state(sweep_dir)) >= 3, 90, "3 trials",
                 poll_s=0.1)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.communicate(timeout=30)
    # a trial dies with its driver (its process tree killed): the resumed sweep must launch it again
    alive = {t: r for t, r in state(sweep_dir).items() if r["state"] == "running" and psutil.pid_exists(r["pid"])}
    victim = max(alive, key=lambda t: alive[t]["search"])
    kill_tree(alive[victim]["pid"], grace_s=5)
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), cwd=tmp_path, timeout=180)
    assert rc == 0, out + err
    trials = state(sweep_dir)
    assert trials[victim]["attempts"] == 2 and trials[victim]["state"] in ("done", "stopped")
    numbers = sorted(r["search"] for r in trials.values())
    assert numbers == list(range(6))  # every configuration asked once, none lost, none repeated
    frozen = study(sweep_dir).get_trials()
    assert [t.number for t in frozen] == numbers
    for record in trials.values():
        t = frozen[record["search"]]
        lr, lam, steps = (record["point"][p] for p in ("optim.lr", "lam", "steps"))
        assert t.params == record["point"]
        if record["state"] == "done":  # the study got the metric at step 4, from the formula the trial logs
            assert t.state == TrialState.COMPLETE and t.value == pytest.approx(0.5 * reward(lr, lam, 0, 4))
        else:  # pruned at rung 2 by the sweep's rule, with the rung's value reported
            assert record["state"] == "stopped" and record["reason"].startswith("SuccessiveHalving at step 2")
            assert t.state == TrialState.PRUNED
            assert t.intermediate_values == {2: pytest.approx(reward(lr, lam, 0, 2))}
            assert record["overrun"] <= 1
    assert {r["state"] for r in trials.values()} == {"done", "stopped"}
    sweep_json = json.loads((sweep_dir / "sweep.json").read_text())
    assert sweep_json["axes"] == ["optim.lr", "lam", "steps"] and sweep_json["search"]["sampler"] == "tpe"


def test_progress_shows_step_metric_eta_and_best_in_place_on_a_terminal():
    data = {"train/reward": {"1": 0.1, "2": 0.2, "3": 0.3, "4": 0.35}, "validation/accuracy": {"0": 0.05, "2": 0.25},
            "timing/train/total_step_time": {"1": 2.0, "2": 2.5, "3": 1.5, "4": 2.0}}
    running = [Running("a1", "lam=0.9 seed=0", data), Running("b2", "lam=1.0 seed=0", {})]
    lines = progress_lines(running, (0.61, "c3 lam=0.95 seed=0"), "validation/accuracy", 12,
                           "timing/train/total_step_time")
    assert lines == ["2 running:",
                     "  a1  step 4/12  validation/accuracy 0.25 @ 2  ETA 16s  lam=0.9 seed=0",  # 8 steps × 2 s
                     "  b2  starting            lam=1.0 seed=0",
                     "  best so far: validation/accuracy 0.61 (c3 lam=0.95 seed=0)"]

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    shown = Progress(screen, 30.0, "[sweep s]")
    assert shown.every_s == 1.0  # a terminal is redrawn every second, a log gets lines every poll_s
    shown.show(lines)
    shown.show(lines)
    assert screen.getvalue().count("\x1b[4F\x1b[J") == 1  # the second block replaced the first
    log = io.StringIO()
    Progress(log, 30.0, "[sweep s]").show(lines)
    assert log.getvalue().splitlines()[1].startswith("[sweep s]   a1  step 4/12") and "\x1b" not in log.getvalue()


def test_a_cmaes_search_asks_its_trials_from_cma_es(tmp_path):
    """``sampler="cmaes"`` works on a fresh install (the locks install the ``cmaes`` package): after Optuna's one
    independent start, each configuration the study hands out comes from CMA-ES (its generation recorded), within
    the space's bounds, through the journal file like any search's."""
    from ppo.sweep.axes import LogUniform, Uniform
    from ppo.sweep.search import Search, open_study, optuna_distributions

    search = Search({"lam": Uniform(0.8, 1.0), "optim.lr": LogUniform(1e-4, 1e-1)}, n_trials=6, sampler="cmaes")
    search.check()
    created = open_study(search, tmp_path, "cma", maximize=True)
    for _ in range(6):
        asked = created.ask(optuna_distributions(search))
        created.tell(asked.number, reward(asked.params["optim.lr"], asked.params["lam"], 0, 4))
    frozen = study_at(tmp_path, "cma").get_trials()
    assert [t.state for t in frozen] == [TrialState.COMPLETE] * 6
    assert all(0.8 <= t.params["lam"] <= 1.0 and 1e-4 <= t.params["optim.lr"] <= 1e-1 for t in frozen)
    assert [("cma:generation" in t.system_attrs) for t in frozen] == [False] + [True] * 5


CRASHES = '''
search=Search({"fail_attempts": Choice([0, 2]), "lam": Choice([0.9, 0.95])}, n_trials=4, sampler="grid", seed=1,
              retries=1),
overrides=["steps=6", "step_s=0.5", "fail_at=3"],
metric="validation/accuracy", step=6,
max_parallel=2,
poll_s=30,
'''


@pytest.mark.slow
def test_a_crashed_or_killed_trial_is_retried_then_marked_failed_never_lost(tmp_path):
    """``fail_attempts=2`` configurations raise at step 3 in their first two attempts: retried once in the call,
    then failed in the study; a ``fail_attempts=0`` trial's process is killed outright at step 2: retried, it
    completes.  Running the sweep again retries the failed ones as new study trials with the same parameters."""
    sweep = write_sweep(tmp_path / "crashes.py", CRASHES)
    sweep_dir = tmp_path / "sweep"
    argv = [sys.executable, str(REPO / "launch.py"), str(sweep), "--run-dir", str(sweep_dir)]
    driver = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def healthy_at_step_2():
            trials = state(sweep_dir) if (sweep_dir / "state.json").exists() else {}
            logs = {t: sweep_dir / r["run_dir"] / "metrics.jsonl" for t, r in trials.items()
                    if r["state"] == "running" and r["point"]["fail_attempts"] == 0}
            return [t for t, log in logs.items() if log.exists() and len(read_records(log)) >= 2]
        (victim, *_) = wait_for(healthy_at_step_2, 90, "a healthy trial at step 2", poll_s=0.1)
        kill_tree(state(sweep_dir)[victim]["pid"], grace_s=0)
        out, _ = driver.communicate(timeout=180)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 1, out  # the fail_attempts=2 trials failed
    trials = state(sweep_dir)
    frozen = study_at(sweep_dir, "crashes").get_trials()
    assert sorted(r["search"] for r in trials.values()) == [t.number for t in frozen] == [0, 1, 2, 3]
    for trial_id, record in trials.items():
        t = frozen[record["search"]]
        retried = record["point"]["fail_attempts"] or trial_id == victim
        assert t.params == record["point"] and record["attempts"] == (2 if retried else 1)
        if record["point"]["fail_attempts"]:
            assert record["state"] == "failed" and "curve failure at step 3" in record["reason"]
            assert t.state == TrialState.FAIL and t.user_attrs["failure"].startswith(f"{trial_id}: ")
        else:  # the killed one too: retried in the same call, resumed, complete with its metric
            assert record["state"] == "done" and t.state == TrialState.COMPLETE
            assert t.value == pytest.approx(0.5 * reward(1e-3, record["point"]["lam"], 0, 6))
    assert f"{victim} crashed; retrying it (1 of 1)" in out and out.count("marked failed") == 2
    # again: the failed configurations run a third attempt (it passes) as new study trials, Optuna's retry of them
    rc, out, err = run_launch(str(sweep), "--run-dir", str(sweep_dir), cwd=tmp_path, timeout=120)
    assert rc == 0, out + err
    again = state(sweep_dir)
    frozen = study_at(sweep_dir, "crashes").get_trials()
    assert len(frozen) == 6 and {r["state"] for r in again.values()} == {"done"}
    for trial_id, record in again.items():
        if trials[trial_id]["state"] == "failed":
            t = frozen[record["search"]]
            assert record["search"] >= 4 and record["failed_search"] == [trials[trial_id]["search"]]
            assert t.state == TrialState.COMPLETE and t.params == record["point"]
            assert RetryFailedTrialCallback.retried_trial_number(t) == trials[trial_id]["search"]
        else:
            assert record["search"] == trials[trial_id]["search"]
