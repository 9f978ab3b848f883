"""``launch.py``: validate an experiment, show it, and run it locally, in-process or on SLURM.

    python launch.py FILE [path=value ...] [--fiddler F ...] [--executor local|slurm|debug] [--name N]
                     [--run-dir D] [--dry-run] [--graph out.svg] [--yes] [--allow-dirty]
    python launch.py status RUN_DIR [--wait] | logs RUN_DIR | cancel RUN_DIR
    python launch.py SWEEP_FILE [path=value ...] [--executor local|slurm] [--max-parallel N] [--dry-run] ...

A file that defines ``SWEEP`` is a sweep: its command line is :mod:`ppo.sweep.cli`'s.

Exit status: 0 success (for SLURM: submitted), 2 with one line on stderr for a bad command line or config (nothing
is created or submitted), 1 when the job itself failed.  Nothing touches the disk before validation passes; then
the run directory is written (see :mod:`ppo.launch.rundir`) and the job runs (local: in a child process, streaming
its output; debug: in this process; SLURM: submitted, and ``launch.py status RUN_DIR`` follows it).  SLURM
submissions need a clean git tree (or ``--allow-dirty``; the diff is saved either way) and a confirmation
(a prompt on a terminal, ``--yes`` otherwise).

This module and what it imports at launch time never import torch, megatron or vllm: a dry run of a GPU recipe
costs only the experiment file's own imports.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from ppo.config.errors import ConfigError

COMMANDS = ("status", "logs", "cancel")
USAGE = ("python launch.py FILE [path=value ...] [--fiddler F] [--executor local|slurm|debug] [--name N] "
         "[--run-dir D] [--dry-run] [--graph out.svg] [--yes] [--allow-dirty]\n"
         "       python launch.py status|logs|cancel RUN_DIR")


EPILOG = """examples:
  python launch.py experiments/tiny_cpu.py --dry-run                 config, changes, resource plan
  python launch.py experiments/tiny_cpu.py trainer.max_steps=20      run here (runs/<name>-<timestamp>)
  python launch.py experiments/tiny_cpu.py --fiddler raw_reward seed=3
  python launch.py experiments/dsr1_7b.py --executor slurm --dry-run    the exact sbatch script
  python launch.py status runs/<run> --wait                          follow a run (also: logs, cancel)
  python launch.py sweeps/gae_lambda.py --dry-run                    a sweep: trials, differences, resources

exit status: 0 success (SLURM: submitted), 2 bad command line or config (one line on stderr, nothing created),
1 the job failed"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ConfigError(f"{message} (usage: python launch.py --help)")


def _launch_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="launch.py", usage=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Validate an experiment, show it, and run it locally, in-process or on SLURM.",
                epilog=EPILOG)
    p.add_argument("file", help="experiment file (def config() -> fdl.Config)")
    p.add_argument("overrides", nargs="*", metavar="path=value",
                   help="override, e.g. policy.optimizer.lr=5e-7, checks.0='x > 1', tag:Seed=3")
    p.add_argument("--fiddler", action="append", default=[], metavar="F", help="apply the file's fiddler F")
    p.add_argument("--executor", choices=("local", "slurm", "debug"), help="run with this executor instead")
    p.add_argument("--name", help="the experiment's name (and the run directory's prefix)")
    p.add_argument("--run-dir", type=Path, help="run directory (default runs/<name>-<timestamp>)")
    p.add_argument("--dry-run", action="store_true", help="print config, plan and sbatch script; create nothing")
    p.add_argument("--graph", type=Path, metavar="FILE", help="draw the config graph (.svg/.png/.pdf, or .dot)")
    p.add_argument("--yes", action="store_true", help="submit to SLURM without asking")
    p.add_argument("--allow-dirty", action="store_true", help="submit to SLURM from a tree with uncommitted changes")
    return p


def _command_parser(command: str) -> argparse.ArgumentParser:
    p = _Parser(prog=f"launch.py {command}")
    p.add_argument("run_dir", type=Path)
    if command == "status":
        p.add_argument("--wait", action="store_true", help="poll until the run has ended")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in COMMANDS and not Path(argv[0]).is_file():
            return _run_command(argv[0], argv[1:])
        if not argv:
            raise ConfigError("no experiment file given (usage: python launch.py FILE [path=value ...])")
        if _sweep_file(argv):
            from ppo.sweep.cli import main as sweep_main

            return sweep_main(argv)
        args = _launch_parser().parse_intermixed_args(argv)
        return _launch(args, argv)
    except ConfigError as err:
        print(f"launch.py: {err}", file=sys.stderr)
        return 2


def _sweep_file(argv: list[str]) -> bool:
    """Whether the file argument is a sweep file (``SWEEP = ...``, see :mod:`ppo.sweep`), told without running it."""
    from ppo.sweep.spec import is_sweep_file

    files = [a for a in argv if a.endswith(".py") and not a.startswith("-") and "=" not in a]
    return bool(files) and is_sweep_file(files[0])


def _run_command(command: str, rest: list[str]) -> int:
    from ppo.launch import commands

    args = _command_parser(command).parse_args(rest)
    if command == "status":
        return commands.status(args.run_dir, wait=args.wait)
    return getattr(commands, command)(args.run_dir)


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    from ppo.launch.executors import DebugExecutor, LocalExecutor, SlurmExecutor
    from ppo.launch.prepare import Request, prepare
    from ppo.launch.rundir import check_run_dir, default_run_dir

    prepared = prepare(Request(args.file, args.overrides, args.fiddler, args.executor, args.name, args.dry_run))
    if args.run_dir:
        check_run_dir(args.run_dir)
    run_dir = (args.run_dir or default_run_dir(prepared.name)).absolute()
    executor = prepared.executor
    if args.graph:
        from ppo.config.graph import render_graph

        print(f"graph: {render_graph(prepared.cfg, args.graph)}")
    if args.dry_run:
        from ppo.launch.report import dry_run_text

        sbatch = None
        if isinstance(executor, SlurmExecutor):
            from ppo.launch.slurm import render_sbatch

            sbatch = render_sbatch(executor, prepared.name, run_dir)
        sys.stdout.write(dry_run_text(prepared, run_dir, sbatch))
        return 0
    if isinstance(executor, SlurmExecutor):
        return _submit(prepared, args, argv, run_dir)
    _create(prepared, argv, run_dir)
    print(f"run directory: {run_dir}", flush=True)
    if isinstance(executor, DebugExecutor):
        from ppo.launch.local import run_debug

        returncode = run_debug(run_dir, executor)
    else:
        assert isinstance(executor, LocalExecutor)
        from ppo.launch.local import run_local

        returncode = run_local(run_dir, executor)
    if returncode != 0:
        print(f"launch.py: the job failed (exit {returncode}); see {run_dir}/job.log or "
              f"python launch.py status {run_dir}", file=sys.stderr)
        return 1
    return 0


def _submit(prepared, args, argv, run_dir: Path) -> int:
    from ppo.launch.slurm import submit

    executor = prepared.executor
    what = f"{executor.nodes} node(s) x {executor.gpus_per_node} GPU(s) for {executor.time_minutes} min"
    git = check_slurm_submission(
        args, shown_by_dry_run="the script", diff_saved_in="the run directory", subject=what,
        question=f"submit '{prepared.name}' ({what}, partition {executor.partition or 'default'})? [y/N] ")
    if git is None:
        print("not submitted")
        return 0
    _create(prepared, argv, run_dir, git)
    try:
        job_id = submit(executor, prepared.name, run_dir)
    except ConfigError:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    print(f"run directory: {run_dir}\nsubmitted SLURM job {job_id}; follow it with: python launch.py status "
          f"{run_dir} (logs, cancel)")
    return 0


def check_slurm_submission(args: argparse.Namespace, *, shown_by_dry_run: str, diff_saved_in: str, subject: str,
                           question: str):
    """What must hold before anything goes to SLURM (a run or a sweep): ``sbatch`` on this machine, a clean tree
    (or ``--allow-dirty``), and the user's yes (``--yes``, or an answer on a terminal).

    Returns the git state to record, or None when the user answered no.
    """
    from ppo.launch.rundir import REPO_ROOT, git_state

    if shutil.which("sbatch") is None:
        raise ConfigError("the SLURM executor needs sbatch on this machine (not found on PATH); --dry-run shows "
                          f"{shown_by_dry_run} without it")
    git = git_state(REPO_ROOT)
    if git.dirty and not args.allow_dirty:
        raise ConfigError(f"the git tree at {REPO_ROOT} has uncommitted changes; commit them or pass "
                          f"--allow-dirty (the diff is saved in {diff_saved_in})")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError(f"submitting {subject} to SLURM needs confirmation: pass --yes")
        if input(question).strip().lower() not in ("y", "yes"):
            return None
    return git


def _create(prepared, argv: list[str], run_dir: Path, git=None) -> None:
    from ppo.config.loading import module_name_for
    from ppo.config.printing import flattened_text
    from ppo.launch.executors import executor_record
    from ppo.launch.rundir import (REPO_ROOT, command_line, create_run_dir, git_state, host_record,
                                   package_versions)

    git = git or git_state(REPO_ROOT)
    request = prepared.request
    _, sys_path = module_name_for(prepared.file.path)
    record = {
        "name": prepared.name,
        "experiment_file": str(prepared.file.path.resolve()),
        "module_name": prepared.file.module_name,
        "sys_path": sys_path,
        "fiddlers": request.fiddlers,
        "overrides": request.overrides,
        "executor": executor_record(prepared.executor),
        "resource_plan": prepared.plan,
        "argv": argv,
        "git_commit": git.commit,
        "git_dirty": git.dirty,
        **host_record(),
    }
    files = {
        "config.json": prepared.config_json,
        "config.txt": flattened_text(prepared.cfg, prepared.edits.marks()) + "\n",
        "overrides.txt": "".join([f"--fiddler {f}\n" for f in request.fiddlers]
                                 + ([f"--name {request.name}\n"] if request.name is not None else [])
                                 + [f"{o}\n" for o in request.overrides]),
        "command.txt": command_line(argv),
        "experiment.py": prepared.file.path.read_text(),
        "git.txt": git.text(),
        "versions.json": json.dumps(package_versions(), indent=2) + "\n",
        "launch.json": json.dumps(record, indent=2, default=str) + "\n",
    }
    if git.dirty:
        files["git.diff"] = git.diff
    create_run_dir(run_dir, files)
