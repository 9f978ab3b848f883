"""Running a night: launch each suite entry, judge its run with the NIGHTLY checks, append the record.

For each entry the launcher is started as a subprocess::

    <launcher> EXPERIMENT OVERRIDES... LAUNCH_ARGS... --executor local|slurm --yes --run-dir RUNS/<night>/<recipe>

``<launcher>`` is ``python launch.py`` by default, or any command (``--launcher`` of ``analysis/nightly.py``), so
the runner can be exercised with a stand-in that keeps the same contract: exit 0 on success, 2 for a bad command
line or config (one line on standard error), 1 when the job failed; the run directory holds ``metrics.jsonl`` and,
optionally, the files :mod:`ppo.nightly.run_facts` reads. A local launch blocks until the job ends. A SLURM launch
returns once the job is submitted, so the runner then follows it with ``<launcher> status RUN_DIR --wait`` (exit 0
completed, 1 failed) and, past the entry's ``timeout_s``, cancels it with ``<launcher> cancel RUN_DIR``. Output goes
to ``<run dir>.stdout.log`` and ``<run dir>.stderr.log`` beside the run directory; the record keeps the last lines
of standard error, and its reason names the job's own error (``status.json``) when the job failed.

The verdict:

- ``INFRA-FAIL``: the launcher (or the SLURM job) failed, or was killed at ``timeout_s``, or the run left no
  readable metrics, or it did not log the step its checks need. The checks are still evaluated on whatever
  metrics exist, for the record, but a failed launch is never reported as a regression.
- otherwise the worst outcome of :func:`ppo.metrics.run_checks` (``FAIL`` for a false check).

The same judgement makes records for runs that already exist (:func:`record_run_dir`, ``nightly.py record``).
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ppo.metrics.checks import Status, run_checks
from ppo.metrics.expressions import parse_check
from ppo.nightly.history import KEY_METRICS, NightRecord, check_name, write_record
from ppo.nightly.run_facts import RunFacts, checkout_facts, read_run_dir, select_curves
from ppo.nightly.suite import Nightly, SuiteEntry

EXECUTORS = ("local", "slurm")
STDERR_TAIL_LINES = 20
LAUNCH_EXIT_MEANING = {1: "the job failed", 2: "bad command line or config"}
_SEVERITY = {"PASS": 0, "FAIL": 1, "INFRA-FAIL": 2}
EXIT_CODES = {"PASS": 0, "FAIL": 1, "INFRA-FAIL": 3}


def default_launcher() -> list[str]:
    return [sys.executable, "launch.py"]


def parse_launcher(command: str | Sequence[str] | None) -> list[str]:
    """A launcher command from a shell-quoted string or an argv list; ``None`` is ``python launch.py``."""
    if command is None:
        return default_launcher()
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise ValueError("the launcher command is empty")
    return argv


@dataclass
class LaunchResult:
    command: list[str]
    exit_code: int | None
    stderr_tail: str
    wall_time_s: float
    timed_out: bool = False
    error: str = ""
    waited: bool = False
    status_line: str = ""


@dataclass
class NightOptions:
    """What every entry of one night shares."""

    history: Path
    runs_dir: Path
    night: str = field(default_factory=lambda: utc_now().date().isoformat())
    executor: str = "local"
    launcher: list[str] = field(default_factory=default_launcher)
    log: Callable[[str], None] = print


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def launch(
    launcher: Sequence[str],
    experiment: Path,
    overrides: Sequence[str],
    *,
    executor: str,
    run_dir: Path,
    timeout_s: float | None = None,
    extra_args: Sequence[str] = (),
) -> LaunchResult:
    """Run the launcher to completion (or to ``timeout_s``, then kill its whole process group).

    With ``executor="slurm"`` the launcher returns once the job is submitted; then ``<launcher> status RUN_DIR
    --wait`` follows the job to its end (exit 0 completed, 1 failed), within the same ``timeout_s``, and a job
    still running at the deadline is cancelled with ``<launcher> cancel RUN_DIR``.
    """
    command = [
        *launcher, str(experiment), *overrides, *extra_args,
        "--executor", executor, "--yes", "--run-dir", str(run_dir),
    ]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    stdout_path = run_dir.parent / f"{run_dir.name}.stdout.log"
    stderr_path = run_dir.parent / f"{run_dir.name}.stderr.log"
    start = time.monotonic()
    code, timed_out, error = _run_logged(command, stdout_path, stderr_path, timeout_s)
    result = LaunchResult(command, code, "", 0.0, timed_out=timed_out, error=error)
    if executor == "slurm" and code == 0:
        remaining = None if timeout_s is None else max(timeout_s - (time.monotonic() - start), 1.0)
        result.waited = True
        result.exit_code, result.timed_out, result.error = _run_logged(
            [*launcher, "status", str(run_dir), "--wait"], stdout_path, stderr_path, remaining
        )
        result.status_line = _tail(stdout_path, 1)
        if result.timed_out:
            _run_logged([*launcher, "cancel", str(run_dir)], stdout_path, stderr_path, 120)
    result.wall_time_s = time.monotonic() - start
    result.stderr_tail = _tail(stderr_path, STDERR_TAIL_LINES)
    return result


def _run_logged(
    command: list[str], stdout_path: Path, stderr_path: Path, timeout_s: float | None
) -> tuple[int | None, bool, str]:
    """``(exit code, timed out, error starting it)``, appending the command's output to the two logs."""
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            return None, False, f"cannot start {command[0]}: {exc.strerror or exc}"
        try:
            return proc.wait(timeout=timeout_s), False, ""
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return proc.wait(), True, ""


def judge(
    facts: RunFacts, nightly: Nightly, launch_result: LaunchResult | None
) -> tuple[str, str, list[dict], dict[str, dict[str, float]]]:
    """``(status, reason, checks, curves)`` for a run: the verdict rules of the module docstring."""
    checks = [parse_check(c) for c in nightly.checks]
    results: list[dict] = []
    curves: dict[str, dict[str, float]] = {}
    status, reason = Status.PASS.value, ""
    if facts.metrics is not None:
        report = run_checks(facts.metrics, checks, step_needed=nightly.step)
        results = report.to_json()["checks"]
        status = report.verdict.value
        if report.verdict is Status.INFRA_FAIL:
            reason = next(r["message"] for r in results if r["status"] == Status.INFRA_FAIL.value)
        elif not checks and report.last_step is None:
            status, reason = Status.INFRA_FAIL.value, "the metrics log has no records"
        needed = list(KEY_METRICS) + [m for c in checks for m in c.metrics]
        curves = select_curves(facts.metrics, needed)
    else:
        status, reason = Status.INFRA_FAIL.value, facts.metrics_problem
        results = [
            {"check": c.source, "status": Status.INFRA_FAIL.value, "value": None, "message": facts.metrics_problem}
            for c in checks
        ]
    if launch_result is not None:
        launch_problem = describe_launch_failure(launch_result, facts.job_error)
        if launch_problem:
            status, reason = Status.INFRA_FAIL.value, launch_problem
    return status, reason, results, curves


def describe_launch_failure(result: LaunchResult, job_error: str | None = None) -> str:
    """One line saying why a launch failed, ``""`` if it (and, for SLURM, the job) succeeded.

    ``job_error`` is the job's own one-line error (``status.json``); it says why, where the launcher's last line
    of standard error only points to the job's log.
    """
    if result.error:
        return result.error
    if result.timed_out:
        return f"launch killed after the {result.wall_time_s:.0f} s timeout" + (
            " (the SLURM job was cancelled)" if result.waited else ""
        )
    if result.exit_code == 0:
        return ""
    if result.waited:
        return f"the SLURM job did not complete: {result.status_line.strip() or f'status exited {result.exit_code}'}"
    if result.exit_code is not None and result.exit_code < 0:
        what = f"killed by signal {-result.exit_code}"
    else:
        meaning = LAUNCH_EXIT_MEANING.get(result.exit_code, "unexpected exit code")
        what = f"exited {result.exit_code} ({meaning})"
    last = job_error or next((line for line in reversed(result.stderr_tail.splitlines()) if line.strip()), "")
    return f"launcher {what}" + (f": {last.strip()}" if last else "")


def run_entry(entry: SuiteEntry, options: NightOptions) -> NightRecord:
    """Launch one suite entry, judge it, write and return its record."""
    run_dir = fresh_run_dir(options.runs_dir / options.night / entry.name)
    started = utc_now()
    commit, dirty, versions = checkout_facts()
    options.log(f"[nightly] {entry.name}: launching {entry.experiment} -> {run_dir}")
    result = launch(
        options.launcher, entry.experiment, entry.overrides,
        executor=options.executor, run_dir=run_dir, timeout_s=entry.timeout_s, extra_args=entry.launch_args,
    )
    facts = read_run_dir(run_dir)
    status, reason, checks, curves = judge(facts, entry.nightly, result)
    record = NightRecord(
        recipe=entry.name,
        night=options.night,
        status=status,
        started_at=started.isoformat(),
        reason=reason,
        step_needed=entry.nightly.step,
        last_step=facts.last_step,
        checks=checks,
        experiment=str(entry.experiment),
        overrides=list(entry.overrides),
        executor=options.executor,
        launch={"command": result.command, "exit_code": result.exit_code, "stderr_tail": result.stderr_tail},
        git_commit=facts.git_commit or commit,
        git_dirty=facts.git_dirty if facts.git_commit else dirty,
        config_hash=facts.config_hash,
        config_text=facts.config_text,
        versions=facts.versions if facts.versions is not None else versions,
        run_dir=str(run_dir.resolve()),
        wandb_url=facts.wandb_url,
        wall_time_s=round(result.wall_time_s, 3),
        curves=curves,
    )
    path = write_record(options.history, record)
    summary = f" ({reason})" if reason else _failing_summary(record)
    options.log(f"[nightly] {entry.name}: {status}{summary} in {result.wall_time_s:.0f} s -> {path}")
    return record


def run_suite(entries: Sequence[SuiteEntry], options: NightOptions) -> list[NightRecord]:
    return [run_entry(entry, options) for entry in entries]


def record_run_dir(
    run_dir: Path,
    *,
    recipe: str,
    night: str | None,
    nightly: Nightly,
    history: Path,
    experiment: str | None = None,
    git_commit: str | None = None,
    wandb_url: str | None = None,
    wall_time_s: float | None = None,
) -> NightRecord:
    """A record for an existing run directory (judged without a launch), written to ``history``."""
    check_name("recipe", recipe)
    facts = read_run_dir(run_dir)
    status, reason, checks, curves = judge(facts, nightly, None)
    ended = _mtime(run_dir / "metrics.jsonl") or _mtime(run_dir)
    started = _mtime(run_dir / "config.json") or _mtime(run_dir / "config.txt") or ended
    record = NightRecord(
        recipe=recipe,
        night=night or dt.datetime.fromtimestamp(ended or time.time(), dt.timezone.utc).date().isoformat(),
        status=status,
        started_at=dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat() if started else None,
        reason=reason,
        step_needed=nightly.step,
        last_step=facts.last_step,
        checks=checks,
        experiment=experiment,
        git_commit=git_commit or facts.git_commit,
        git_dirty=facts.git_dirty,
        config_hash=facts.config_hash,
        config_text=facts.config_text,
        versions=facts.versions,
        run_dir=str(run_dir.resolve()),
        wandb_url=wandb_url or facts.wandb_url,
        wall_time_s=wall_time_s,
        curves=curves,
    )
    write_record(history, record)
    return record


def worst_status(statuses: Sequence[str]) -> str:
    return max(statuses, key=_SEVERITY.__getitem__, default="PASS")


def fresh_run_dir(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``, ... if a run already used it (a rerun the same night)."""
    candidate, n = path, 1
    while candidate.exists() or candidate.with_name(f"{candidate.name}.stderr.log").exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def _failing_summary(record: NightRecord) -> str:
    failing = record.failing_checks
    if not failing:
        return f" ({len(record.checks)} checks)"
    return f" ({len(failing)} of {len(record.checks)} checks failed: {failing[0]['check']})"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 64 * 1024, 0))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
