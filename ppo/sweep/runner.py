"""Running a planned sweep: run directories, submission, polling, early stopping, resume.

One call of :meth:`SweepRunner.run` (what ``launch.py SWEEP_FILE`` does after validation):

1. takes the sweep directory's lock, writes ``sweep.json`` and a copy of the sweep file, and adds every trial of
   the plan to ``state.json`` (trials already there keep their state);
2. writes each new trial's run directory exactly as ``launch.py`` writes a run's
   (:func:`ppo.launch.rundir.write_run_dir`: config, overrides, git state, versions, command line); a run directory
   that exists is reused as it is, which is how a resubmitted trial resumes from its checkpoints;
3. catches up with trials an earlier call left running: local jobs still alive are adopted, SLURM jobs are asked
   about; a trial whose job ended meanwhile gets its outcome;
4. launches every trial that is ``pending`` without a live job, or ``failed`` (resubmission), once per call:
   locally ``max_parallel`` at a time, on SLURM as one job array with that concurrency;
5. watches the running trials: outcomes of ended jobs (local jobs every :data:`WATCH_S` seconds, SLURM's every
   ``poll_s`` seconds), and the early-stopping rules on the running trials' ``metrics.jsonl`` every :data:`WATCH_S`
   seconds (:mod:`ppo.sweep.stopping`), so a trial is judged as soon as it logs a rung; a stopped trial is
   cancelled (local: its process tree killed by PID; SLURM: ``scancel`` through submitit) and recorded with the
   reason, the step that decided it (``stop_step``) and the steps it logged after that (``overrun``);
6. shows each running trial's step, latest metric and ETA, and the best so far (:mod:`ppo.sweep.progress`): in
   place on a terminal, as periodic lines in a log;
7. ends when no trial is pending or running, printing one line per trial.  ``detach`` (SLURM) returns once the
   array is submitted; running the same command again re-attaches.

Each trial's ``launch.json`` gets ``"sweep": {"id", "dir", "trial"}``; its wandb group is set by the plan
(:mod:`ppo.sweep.plan`).

A failing trial never stops the sweep: its error is recorded and the others go on.  The exit status is 0 when
every trial is done or stopped, 1 when any failed.  Ctrl-C stops local trials (recorded as failed, so the next
call resumes them) and leaves SLURM trials running.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from ppo.config.errors import ConfigError
from ppo.launch.rundir import GitState, git_state, read_json, write_json
from ppo.metrics import MetricsFormatError, last_step, load_metrics
from ppo.sweep import slurm as slurm_trials
from ppo.sweep.local import LocalTrials, outcome
from ppo.sweep.plan import PlannedTrial, SweepPlan, plan_trial
from ppo.sweep.progress import Progress, Running, progress_lines
from ppo.sweep.search import open_study, optuna_distributions, storage_url
from ppo.sweep.state import DONE, FAILED, FINISHED, PENDING, RUNNING, STOPPED, SWEEP_FILE, SweepState, now
from ppo.sweep.stopping import judge, value_at
from ppo.sweep.trial_dir import create_trial_dir

WATCH_S = 0.25
"""Seconds between looks at the running trials' metrics files (a ``stat`` each; re-read only when changed)."""


def sweep_record(plan: SweepPlan, sweep_dir: Path) -> dict:
    loaded, spec = plan.loaded, plan.loaded.spec
    return {
        "id": loaded.name,
        "sweep_file": str(loaded.path.resolve()),
        "base": str(loaded.base_path.resolve()),
        "metric": spec.metric, "mode": spec.mode, "step": spec.step,
        "seed_path": spec.seed_path,
        "step_time_metric": spec.step_time_metric,
        "executor": plan.kind,
        "max_parallel": plan.max_parallel,
        "common_overrides": [*spec.overrides, *plan.extra_overrides],
        "fiddlers": list(spec.fiddlers),
        "axes": list(dict.fromkeys([*(spec.search.space if spec.search else ()),
                                    *(p for t in plan.trials for p in t.trial.point)])),
        "search": None if spec.search is None else {
            "sampler": spec.search.sampler, "n_trials": spec.search.n_trials, "seed": spec.search.seed,
            "storage": storage_url(spec.search, sweep_dir), "space": spec.search.describe()},
        "trials": [{"id": t.trial.id, "config_id": t.trial.config_id, "point": t.trial.point, "seed": t.trial.seed,
                    "overrides": t.overrides} for t in plan.trials],
    }


class SweepRunner:
    def __init__(self, plan: SweepPlan, sweep_dir: Path, *, out: TextIO | None = None, poll_s: float | None = None,
                 detach: bool = False, git: GitState | None = None):
        self.plan = plan
        self.dir = Path(sweep_dir).absolute()
        self.out = out or sys.stdout
        self.poll_s = poll_s if poll_s is not None else plan.loaded.spec.poll_s
        self.detach = detach
        self.git = git
        self.state = SweepState(self.dir)
        self.local = LocalTrials()
        self._metrics: dict[str, tuple[tuple, dict]] = {}
        self._order = {t.trial.id: t for t in plan.trials}
        self.search = plan.loaded.spec.search
        self.study = None
        self._started: set[str] = set()
        """Trials launched (or claimed by an array element) in this call: a crash of one is retried or failed."""
        self._retried: dict[str, int] = {}
        self.progress = Progress(self.out, self.poll_s, f"[sweep {plan.loaded.name}]")

    # ------------------------------------------------------------------ output
    def say(self, message: str) -> None:
        self.progress.clear()
        print(f"[sweep {self.plan.loaded.name}] {message}", file=self.out, flush=True)

    def _changed(self, trial_id: str, state: str, reason: str | None = None, **fields) -> None:
        if self.state.set(trial_id, state, reason, **fields):
            label = self._order[trial_id].trial.label() if trial_id in self._order else ""
            self.say(f"{trial_id} {state}{': ' + reason if reason else ''}  [{label}]")
            if self.study is not None and state in (DONE, STOPPED):
                self._tell(self.state.trials[trial_id].get("search"))

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        self.state.lock()
        previous = read_json(self.dir / SWEEP_FILE) if (self.dir / SWEEP_FILE).exists() else None
        if previous is not None and previous.get("id") != self.plan.loaded.name:
            raise ConfigError(f"{self.dir} holds sweep '{previous.get('id')}', not '{self.plan.loaded.name}'; "
                              f"choose another --run-dir")
        if previous is None and self.dir.exists() and any(p.name != ".lock" for p in self.dir.iterdir()):
            raise ConfigError(f"{self.dir} exists and is not a sweep directory; choose another --run-dir")
        if self.search is not None:
            self._open_study()
        write_json(self.dir / SWEEP_FILE, sweep_record(self.plan, self.dir))
        shutil.copyfile(self.plan.loaded.path, self.dir / "sweep.py")
        for planned in self.plan.trials:
            trial = planned.trial
            self.state.add(trial.id, point=trial.point, seed=trial.seed, config_id=trial.config_id,
                           label=trial.label(), run_dir=f"trials/{trial.id}", executor=self.plan.kind)
            if (self.state.run_dir(trial.id) / "config.json").exists():
                self._check_reusable(trial.id, self.state.run_dir(trial.id))
        git = self.git or git_state()
        for planned in self.plan.trials:
            run_dir = self.state.run_dir(planned.trial.id)
            if not (run_dir / "config.json").exists():
                self._create(planned, run_dir, git)
        self.state.save()

    def _check_reusable(self, trial_id: str, run_dir: Path) -> None:
        """A trial to (re)launch, or to follow, must be of this sweep's kind of executor."""
        record = self.state.trials[trial_id]
        if record.get("job_live") and record.get("executor") != self.plan.kind:
            raise ConfigError(f"trial {trial_id} is running with the {record.get('executor')} executor; follow it "
                              f"with --executor {record.get('executor')}")
        if record["state"] in FINISHED or record.get("job_live"):
            return
        kind = read_json(run_dir / "launch.json")["executor"]["kind"]
        if kind != self.plan.kind:
            raise ConfigError(f"trial {trial_id} was prepared for the {kind} executor in {run_dir}; run the sweep "
                              f"with --executor {kind}, or in a new directory (--run-dir)")

    def _create(self, planned: PlannedTrial, run_dir: Path, git: GitState) -> None:
        create_trial_dir(self.plan, planned, run_dir, git, self.dir)

    # ------------------------------------------------------------------ job states
    def _active(self) -> list[str]:
        """Trials with a job that has not ended (``job_live``): queued or running."""
        return [t for t, r in self.state.trials.items() if r["state"] in (PENDING, RUNNING) and r.get("job_live")]

    def _slurm_folder(self) -> Path:
        return self.dir / slurm_trials.FOLDER

    def refresh(self) -> None:
        """Outcomes of jobs that ended, states of jobs that are queued or running."""
        if self.plan.is_slurm and self.search is not None:
            self._collect_claims()
        active = self._active()
        if self.plan.is_slurm:
            jobs = {t: self.state.trials[t]["jobs"][-1]["job_id"] for t in active}
            elements = list(self._elements())
            states = slurm_trials.poll_states(self._slurm_folder(), [*jobs.values(), *elements])
            self._drop_dead_elements({j: states[j] for j in elements})
            for trial_id, job_id in jobs.items():
                state, reason = slurm_trials.trial_outcome(self.state.run_dir(trial_id), job_id, states[job_id])
                live = state in (PENDING, RUNNING)
                self._changed(trial_id, state, reason, job_live=live)
            return
        for trial_id in active:
            if trial_id not in self.local:
                continue
            ended = self.local.poll(trial_id)
            if ended is not None:
                self._changed(trial_id, ended[0], ended[1], job_live=False, pid=None)

    def catch_up(self) -> None:
        """Reconnect with what an earlier driver left running (before deciding what to launch)."""
        for trial_id, record in self.state.trials.items():
            if record["state"] not in (PENDING, RUNNING) or not record.get("job_live"):
                continue
            if record.get("executor") == "local" or not record.get("jobs"):
                run_dir = self.state.run_dir(trial_id)
                if self.local.adopt(trial_id, record.get("pid"), run_dir):
                    self.say(f"{trial_id} still running (pid {record['pid']}); following it")
                    continue
                state, reason = outcome(run_dir, None)
                if state == FAILED:
                    reason = f"interrupted: {reason}"
                self._changed(trial_id, state, reason, job_live=False, pid=None)
        if self.plan.is_slurm:
            self.refresh()

    # ------------------------------------------------------------------ launching
    def to_launch(self) -> list[str]:
        return [t.trial.id for t in self.plan.trials
                if self.state.trials[t.trial.id]["state"] in (PENDING, FAILED)
                and not self.state.trials[t.trial.id].get("job_live")]

    def launch_slurm(self, ids: list[str]) -> None:
        if self.search is not None:
            self._launch_search_elements()
        if not ids:
            return
        for trial_id in ids:
            self._reopen(trial_id)
        self._started.update(ids)
        run_dirs = [self.state.run_dir(t) for t in ids]
        job_ids = slurm_trials.submit_array(self._slurm_folder(), self.plan.loaded.name, run_dirs,
                                            self.plan.max_parallel)
        for trial_id, job_id in zip(ids, job_ids):
            record = self.state.trials[trial_id]
            jobs = [*record["jobs"], {"job_id": job_id, "submitted": now()}]
            self._changed(trial_id, PENDING, None, jobs=jobs, job_live=True, attempts=record["attempts"] + 1)
        first = job_ids[0].split("_")[0]
        self.say(f"submitted {len(ids)} trial(s) to SLURM as job array {first} "
                 f"(at most {self.plan.max_parallel} at a time)")

    def launch_local(self, queue: list[str]) -> None:
        while not queue and len(self.local) < self.plan.max_parallel and self._asked() < self.search_trials():
            queue += self._ask()
        while queue and len(self.local) < self.plan.max_parallel:
            trial_id = queue.pop(0)
            record = self.state.trials[trial_id]
            self._reopen(trial_id)
            self._started.add(trial_id)
            pid = self.local.start(trial_id, self.state.run_dir(trial_id))
            self._changed(trial_id, RUNNING, None, pid=pid, job_live=True, attempts=record["attempts"] + 1,
                          jobs=[*record["jobs"], {"pid": pid, "started": now()}])

    # ------------------------------------------------------------------ early stopping
    def _data(self, trial_id: str) -> dict:
        path = self.state.run_dir(trial_id) / "metrics.jsonl"
        try:
            stat = path.stat()
        except FileNotFoundError:
            return {}
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._metrics.get(trial_id)
        if cached and cached[0] == key:
            return cached[1]
        try:
            data = load_metrics(path)
        except (OSError, MetricsFormatError):
            return cached[1] if cached else {}
        self._metrics[trial_id] = (key, data)
        return data

    def apply_stopping(self) -> None:
        """Judge every running trial on what it has logged; cancel the ones a rule stops.

        Called every :data:`WATCH_S` seconds: the metrics files are re-read only when they changed, so a trial is
        judged within a fraction of a second of logging a rung, and stopped before it logs another step unless its
        steps are shorter than that.  ``overrun`` in the trial's record counts the steps it logged after the step
        that decided the stop (0 when the stop landed in time)."""
        spec = self.plan.loaded.spec
        if spec.stopping is None:
            return
        running = [t for t, r in self.state.trials.items() if r["state"] == RUNNING and r.get("job_live")]
        if not running:
            return
        others = {t: self._data(t) for t in self.state.trials}
        changed = False
        for trial_id in running:
            record = self.state.trials[trial_id]
            verdict = judge(spec.stopping, trial_id, others[trial_id], others, spec.metric, spec.maximize,
                            record.get("rungs", {}), record.get("gates", []))
            changed |= (verdict.rungs, verdict.gates) != (record.get("rungs", {}), record.get("gates", []))
            if self.study is not None:
                self._report_rungs(record, set(verdict.rungs) - set(record.get("rungs", {})), others[trial_id])
            record["rungs"], record["gates"] = verdict.rungs, verdict.gates
            if verdict.stop:
                decided = last_step(others[trial_id])
                if self.cancel(trial_id):
                    after = last_step(self._data(trial_id))
                    self._changed(trial_id, STOPPED, verdict.reason, job_live=False, stop_step=decided,
                                  overrun=(after or 0) - (decided or 0))
        if changed:
            self.state.save()

    def cancel(self, trial_id: str) -> bool:
        """Stop the trial's job; False when it had ended already (its outcome is then recorded, not a stop)."""
        if self.plan.is_slurm:
            job_id = self.state.trials[trial_id]["jobs"][-1]["job_id"]
            try:
                slurm_trials.cancel(self._slurm_folder(), job_id)
            except subprocess.CalledProcessError as err:
                self.say(f"{trial_id}: scancel {job_id} failed ({err}); the next poll records how it ended")
                return False
            return True
        ended = self.local.poll(trial_id)
        if ended is not None:
            self._changed(trial_id, ended[0], ended[1], job_live=False, pid=None)
            return False
        self.local.stop(trial_id)
        return True

    # ------------------------------------------------------------------ search (ppo.sweep.search)
    def search_trials(self) -> int:
        """How many configurations the study may ask for (0 for an expanded sweep)."""
        return 0 if self.search is None else self.search.n_trials

    def _asked(self) -> int:
        """Configurations the study handed out: run, or refused (the base refused them, or they repeat one)."""
        numbers = {r["search"] for r in self.state.trials.values() if r.get("search") is not None}
        return len(numbers | {r["search"] for r in self.state.data.get("refused", [])})

    def _refuse(self, number: int, point: dict, reason: str) -> None:
        from optuna.trial import TrialState

        self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
        self.say(f"study trial {number} refused: {reason}")
        self.state.data.setdefault("refused", []).append({"search": number, "point": point, "reason": reason})
        self.state.save()

    def _open_study(self) -> None:
        """Load (or create) the study, re-plan the trials it asked for earlier, and mark failed the study's trials
        that a driver asked for but died before recording (so none is left running forever).  On SLURM, the
        trials array elements asked for are read from their claims first (an element asking meanwhile is waited
        for: it holds the claims' lock)."""
        spec = self.plan.loaded.spec
        self.study = open_study(self.search, self.dir, self.plan.loaded.name, spec.maximize)
        if self.plan.is_slurm:
            from ppo.sweep.slurm_search import claims_locked

            with claims_locked(self.dir):
                self._collect_claims()
                self._fail_orphans()
        else:
            self._fail_orphans()

    def _replan(self, trial_id: str, record: dict) -> None:
        """The planned trial of a study trial recorded earlier (by a driver, or an array element's claim)."""
        if trial_id in self._order:
            return
        point = {**{p: record["point"][p] for p in self.search.space if p in record["point"]},
                 **record["point"]}  # the sweep file's order (state.json sorts the keys)
        planned = plan_trial(self.plan, point, record["seed"], len(self.plan.trials))
        self.plan.trials.append(planned)
        self._order[trial_id] = planned

    def _fail_orphans(self) -> None:
        for trial_id, record in self.state.trials.items():
            if record.get("search") is not None:
                self._replan(trial_id, record)
        known = {r["search"] for r in self.state.trials.values() if r.get("search") is not None}
        held = len(self.study.get_trials(deepcopy=False))
        if known and max(known) >= held:
            raise ConfigError(f"{self.dir}/state.json records study trial {max(known)}, but the study in "
                              f"{storage_url(self.search, self.dir)} holds {held} trial(s); run the sweep with the "
                              f"study it started with, or in a new directory (--run-dir)")
        from optuna.trial import TrialState

        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if frozen.number not in known:
                self.study.tell(frozen.number, state=TrialState.FAIL)
                self.say(f"study trial {frozen.number} was asked for but never started; marked failed")
        for number in known:
            self._tell(number)  # outcomes a driver recorded but died before telling

    def _ask(self) -> list[str]:
        """Ask the study for the next configuration; its trials (one per seed) are planned, recorded and created."""
        spec = self.plan.loaded.spec
        asked = self.study.ask(optuna_distributions(self.search))
        point = {path: asked.params[path] for path in self.search.space}
        ids = []
        git = self.git or git_state()
        planned_seeds = []
        for seed in spec.seeds:
            try:
                planned = plan_trial(self.plan, point, seed, len(self.plan.trials) + len(planned_seeds))
            except ConfigError as err:
                self._refuse(asked.number, point, str(err))
                return []
            if planned.trial.id in self.state.trials:
                earlier = self.state.trials[planned.trial.id].get("search")
                self._refuse(asked.number, point, f"repeats the configuration of study trial {earlier}")
                return []
            planned_seeds.append(planned)
        for planned in planned_seeds:
            trial = planned.trial
            self.plan.trials.append(planned)
            self._order[trial.id] = planned
            self.state.add(trial.id, point=trial.point, seed=trial.seed, config_id=trial.config_id,
                           label=trial.label(), run_dir=f"trials/{trial.id}", executor=self.plan.kind,
                           search=asked.number)
            self._create(planned, self.state.run_dir(trial.id), git)
            ids.append(trial.id)
        self.state.save()
        self.say(f"study trial {asked.number}: " + " ".join(f"{p}={v!r}" for p, v in point.items()))
        return ids

    def _value(self, trial_id: str) -> float | None:
        spec = self.plan.loaded.spec
        data = self._data(trial_id)
        reached = last_step(data)
        if reached is None or reached < spec.step:
            return None
        value = value_at(data.get(spec.metric, {}), spec.step)
        return value if value is not None and math.isfinite(value) else None

    def _tell(self, number: int | None) -> None:
        """Tell the study how configuration ``number`` ended, once every seed of it has: the mean metric over the
        seeds that completed, or pruned when early stopping stopped every seed (even one that logged the sweep's
        step before its stop landed: the rule's verdict stands, as in the report's ranking)."""
        if number is None:
            return
        from optuna.trial import TrialState

        seeds = [t for t, r in self.state.trials.items() if r.get("search") == number]
        states = [self.state.trials[t]["state"] for t in seeds]
        if not all(s in FINISHED for s in states):
            return
        if self.study.get_trials(deepcopy=False)[number].state != TrialState.RUNNING:
            return
        values = [v for v in (self._value(t) for t in seeds if self.state.trials[t]["state"] == DONE) if v is not None]
        if values:  # an array element may have told its own trial meanwhile (the same value)
            self.study.tell(number, sum(values) / len(values), skip_if_finished=True)
        else:
            self.study.tell(number, state=TrialState.PRUNED, skip_if_finished=True)

    def _report_rungs(self, record: dict, rungs: set[str], data: dict) -> None:
        """Each rung a trial passed goes to its study trial as an intermediate value (the rule's statistic), so a
        trial the rule stops is a pruned trial with its curve in Optuna's own tools too."""
        rule = self.plan.loaded.spec.stopping.rule
        number = record.get("search")
        if rule is None or number is None:
            return
        from optuna.trial import Trial

        frozen = self.study.get_trials(deepcopy=False)[number]
        series = data.get(rule.metric or self.plan.loaded.spec.metric, {})
        for rung in sorted(rungs, key=int):
            value = rule.statistic(series, int(rung))
            if value is not None and math.isfinite(value) and int(rung) not in frozen.intermediate_values:
                Trial(self.study, frozen._trial_id).report(value, int(rung))

    def _retry_or_fail(self) -> list[str]:
        """Search trials launched in this call that crashed (failed, not stopped): relaunched up to ``retries``
        times (they resume from their checkpoints), then their study trial is told failed, with the reason as its
        ``failure`` user attribute, so the study never keeps a dead trial running."""
        if self.search is None:
            return []
        from optuna.trial import Trial, TrialState

        retry = []
        for trial_id in sorted(self._started):
            record = self.state.trials[trial_id]
            if record["state"] != FAILED or record.get("job_live"):
                continue
            self._started.discard(trial_id)
            done = self._retried.get(trial_id, 0)
            if done < self.search.retries:
                self._retried[trial_id] = done + 1
                self.say(f"{trial_id} crashed; retrying it ({done + 1} of {self.search.retries})")
                retry.append(trial_id)
                continue
            number = record["search"]
            frozen = self.study.get_trials(deepcopy=False)[number]
            if frozen.state == TrialState.RUNNING:
                Trial(self.study, frozen._trial_id).set_user_attr("failure", f"{trial_id}: {record.get('reason')}")
                self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
                self.say(f"study trial {number} marked failed ({trial_id} crashed {done + 1} time(s)); running the "
                         f"sweep again retries it as a new study trial with the same parameters")
        return retry

    def _reopen(self, trial_id: str) -> None:
        """A trial relaunched after its study trial was told failed gets a fresh study trial with the same
        parameters, as Optuna's ``RetryFailedTrialCallback`` makes it (``failed_trial`` and ``retry_history`` system
        attributes), and so do the other seeds of its configuration; the failed trial stays failed in the study."""
        record = self.state.trials[trial_id]
        number = record.get("search")
        if self.study is None or number is None:
            return
        from optuna.trial import TrialState

        failed = self.study.get_trials(deepcopy=False)[number]
        if failed.state != TrialState.FAIL:
            return
        from contextlib import nullcontext

        from optuna.trial import create_trial

        from ppo.sweep.slurm_search import claims_locked

        history = [*failed.system_attrs.get("retry_history", []), number]
        retry = create_trial(state=TrialState.WAITING, params=failed.params, distributions=failed.distributions,
                             system_attrs={"failed_trial": failed.system_attrs.get("failed_trial", number),
                                           "retry_history": history})  # what RetryFailedTrialCallback adds
        with claims_locked(self.dir) if self.plan.is_slurm else nullcontext():  # no array element asks meanwhile
            self.study.add_trial(retry)
            asked = self.study.ask(optuna_distributions(self.search))
        for other in self.state.trials.values():
            if other.get("search") == number:
                other.setdefault("failed_search", []).append(number)
                other["search"] = asked.number
        self.state.save()
        self.say(f"study trial {number} failed earlier; {trial_id} runs again as study trial {asked.number}")

    # ------------------------------------------------------------------ search on SLURM (ppo.sweep.slurm_search)
    def _elements(self) -> dict[str, str]:
        """Array elements submitted that have not claimed a trial yet: {job id: when submitted}."""
        return self.state.data.setdefault("elements", {})

    def _launch_search_elements(self) -> None:
        """One array element for each configuration the study has yet to hand out (and no element waits for)."""
        from ppo.sweep.slurm_search import SearchTask

        count = self.search_trials() - self._asked() - len(self._elements())
        if count <= 0:
            return
        task = SearchTask(str(self.dir), self.git or git_state())
        job_ids = slurm_trials.submit_search_array(self._slurm_folder(), self.plan.loaded.name, self.plan.base.executor,
                                                   count, self.plan.max_parallel, task)
        self._elements().update({j: now() for j in job_ids})
        self.state.save()
        self.say(f"submitted {count} search element(s) to SLURM as job array {job_ids[0].split('_')[0]} (at most "
                 f"{self.plan.max_parallel} at a time); each asks the study for its configuration when it starts")

    def _collect_claims(self) -> None:
        """Trials that array elements asked the study for (their claims), recorded to follow like any trial."""
        from ppo.sweep.slurm_search import read_claims

        elements = self._elements()
        refused = {r["search"] for r in self.state.data.get("refused", [])}
        for job_id, claim in read_claims(self.dir).items():
            elements.pop(job_id, None)
            number = claim["search"]
            if claim.get("refused"):
                if number not in refused:
                    self.state.data.setdefault("refused", []).append(
                        {"search": number, "point": claim["point"], "reason": claim["refused"]})
                    self.say(f"study trial {number} refused: {claim['refused']}")
                continue
            trial_id = claim["trial"]
            if trial_id in self.state.trials:
                continue
            record = self.state.add(trial_id, point=claim["point"], seed=claim["seed"], config_id=claim["config_id"],
                                    label=claim["label"], run_dir=claim["run_dir"], executor=self.plan.kind,
                                    search=number)
            self._replan(trial_id, record)
            self.say(f"study trial {number} (element {job_id}): "
                     + " ".join(f"{p}={v!r}" for p, v in self._order[trial_id].trial.point.items()))
            self._changed(trial_id, RUNNING, None, jobs=[{"job_id": job_id, "claimed": now()}], job_live=True,
                          attempts=1)
            self._started.add(trial_id)
        self.state.save()

    def _drop_dead_elements(self, states: dict[str, str]) -> None:
        """Elements that ended without a claim (before they could ask): forgotten, so the next call submits others."""
        from ppo.sweep.slurm_search import claim_path

        for job_id, slurm_state in states.items():
            if slurm_state in slurm_trials.QUEUED | slurm_trials.ACTIVE or job_id not in self._elements():
                continue
            if claim_path(self.dir, job_id).exists():
                self._collect_claims()
                continue
            del self._elements()[job_id]
            self.state.save()
            self.say(f"search element {job_id} ended ({slurm_state}) before asking the study; the next call of the "
                     f"sweep submits another")

    def _progress_lines(self) -> list[str]:
        spec = self.plan.loaded.spec
        running = [Running(t, self._order[t].trial.label() if t in self._order else "", self._data(t))
                   for t, r in self.state.trials.items() if r["state"] == RUNNING and r.get("job_live")]
        done = [(v, t) for t, r in self.state.trials.items() if r["state"] == DONE
                and (v := self._value(t)) is not None]
        best = (max if spec.maximize else min)(done) if done else None
        shown = (best[0], f"{best[1]} {self._order[best[1]].trial.label()}" if best[1] in self._order else best[1]
                 ) if best else None
        return progress_lines(running, shown, spec.metric, spec.step, spec.step_time_metric)

    # ------------------------------------------------------------------ the loop
    def run(self) -> int:
        try:
            self.setup()
            self.catch_up()
            todo = self.to_launch()
            done_before = [t.trial.id for t in self.plan.trials if self.state.trials[t.trial.id]["state"] in FINISHED]
            if done_before:
                self.say(f"{len(done_before)} trial(s) already finished; skipping them")
            try:
                if self.plan.is_slurm:
                    self.launch_slurm(todo)
                    if self.detach:
                        self.say(f"detached; follow it with the same command, or see {self.dir}/state.json")
                        return 0
                self._loop(todo)
            except KeyboardInterrupt:
                return self._interrupted()
            return self.summary()
        finally:
            self.state.unlock()

    def _loop(self, queue: list[str]) -> None:
        """Poll until no trial is queued, pending or running.

        Local jobs and every trial's metrics are looked at every :data:`WATCH_S` seconds (early stopping acts on
        the step that decides it, not at the next poll); SLURM's job states are asked every ``poll_s`` seconds
        (one ``sacct`` call)."""
        queue = [] if self.plan.is_slurm else list(queue)
        tick = min(self.poll_s, WATCH_S)
        next_sacct = time.monotonic() + self.poll_s
        while True:
            if not self.plan.is_slurm:
                self.launch_local(queue)
            if self.plan.is_slurm and not self._active() and not self._elements():
                return
            if not queue and not self._active() and self._asked() >= self.search_trials():
                return
            time.sleep(tick)
            if not self.plan.is_slurm or time.monotonic() >= next_sacct:
                self.refresh()
                next_sacct = time.monotonic() + self.poll_s
                retry = self._retry_or_fail()
                if self.plan.is_slurm:
                    self.launch_slurm(retry)
                else:
                    queue += retry
            self.apply_stopping()
            if self.progress.due():
                self.progress.show(self._progress_lines())

    def _interrupted(self) -> int:
        if self.plan.is_slurm:
            self.say("interrupted; the SLURM trials keep running (run the same command to follow them)")
            return 0
        for trial_id in list(self.local.ids()):
            self.local.stop(trial_id)
            self._changed(trial_id, FAILED, "interrupted: the sweep driver was stopped (run the sweep again to "
                                            "resume)", job_live=False, pid=None)
        self.say("interrupted; running trials were stopped (run the same command to resume them)")
        return 1

    def summary(self) -> int:
        self.progress.clear()
        counts = self.state.counts()
        self.say(", ".join(f"{n} {s}" for s, n in counts.items() if n))
        for planned in self.plan.trials:
            record = self.state.trials[planned.trial.id]
            reason = f"  ({record['reason']})" if record.get("reason") else ""
            print(f"  {planned.trial.id}  {record['state']:<8} {planned.trial.label()}{reason}", file=self.out)
        print(f"results: python analysis/sweep_report.py {self.dir}", file=self.out, flush=True)
        failed = [t for t in self._order if self.state.trials[t]["state"] == FAILED]
        return 1 if failed else 0

