"""``launch.py``: check an experiment, show it, and run it locally, in-process or on SLURM.

    python launch.py FILE [path=value ...] [--fiddler F ...] [--executor local|slurm|debug] [--name N]
                     [--run-dir D] [--dry-run] [--graph out.svg] [--yes] [--allow-dirty]
    python launch.py status RUN_DIR [--wait] | logs RUN_DIR | cancel RUN_DIR
    python launch.py prepare FILE [path=value ...] [--fiddler F ...] [--executor E]
    python launch.py export RUN_DIR [--step N] [--critic] --out DIR
    python launch.py eval RUN_DIR [--step N] [--samples K] [--dataset D]
    python launch.py SWEEP_FILE [path=value ...] [--executor local|slurm] [--max-parallel N] [--dry-run] ...

A file that defines ``SWEEP`` is a sweep: ``launch.py`` hands it to :mod:`ppo.sweep.cli` before this module sees it
(this layer knows nothing of sweeps; sweeps build on it).

Exit status: 0 success (for SLURM: submitted), 2 with one line on stderr for a bad command line or config (nothing
is created or submitted), 1 when the job itself failed.  Nothing touches the disk before validation passes; then
the run directory is written (:func:`ppo.launch.rundir.write_run_dir`) and the job runs (local: in a child process,
streaming its output; debug: in this process; SLURM: submitted, and ``launch.py status RUN_DIR`` follows it).  SLURM
submissions need a clean git tree (or ``--allow-dirty``; the diff is saved either way) and a confirmation
(a prompt on a terminal, ``--yes`` otherwise): :func:`ppo.launch.slurm.check_submission`.  Hub models and datasets
the experiment names are fetched on this host before anything is created or queued (:mod:`ppo.launch.fetch`);
``prepare FILE`` does only that, and prints the command lines to launch with (:mod:`ppo.launch.prepare_command`).
``export RUN_DIR`` writes a checkpoint step's policy or critic as an HF folder (:mod:`ppo.launch.export_command`);
``eval RUN_DIR`` scores one on held-out problems with vLLM (:mod:`ppo.launch.eval_command`).

This module and what it imports at launch time never import torch, megatron or vllm: a dry run of a GPU recipe
costs only the experiment file's own imports.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ppo.config.errors import ConfigError

COMMANDS = ("status", "logs", "cancel", "prepare", "export", "eval")
USAGE = ("python launch.py FILE [path=value ...] [--fiddler F] [--executor local|slurm|debug] [--name N] "
         "[--run-dir D] [--dry-run] [--graph out.svg] [--yes] [--allow-dirty]\n"
         "       python launch.py status|logs|cancel RUN_DIR\n"
         "       python launch.py prepare FILE [path=value ...] [--fiddler F] [--executor E]\n"
         "       python launch.py export RUN_DIR [--step N] [--critic] --out DIR\n"
         "       python launch.py eval RUN_DIR [--step N] [--samples K] [--dataset D]")


EPILOG = """examples:
  python launch.py experiments/tiny_cpu.py --dry-run                 config, changes, resource plan
  python launch.py experiments/tiny_cpu.py trainer.max_steps=20      run here (runs/<name>-<timestamp>)
  python launch.py experiments/tiny_cpu.py --fiddler raw_reward seed=3
  python launch.py experiments/dsr1_7b.py --executor slurm --dry-run    the exact sbatch script
  python launch.py status runs/<run> --wait                          follow a run (also: logs, cancel)
  python launch.py prepare experiments/math_1b.py                    fetch its hub models and datasets
  python launch.py export runs/<run> --step 40 --out hf/step40       a checkpoint step as an HF folder (--critic)
  python launch.py eval runs/<run> --samples 32                       the latest checkpoint: accuracy, avg@32, pass@k
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


def _prepare_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="launch.py prepare", description="Fetch the hub models (into the HF cache) and datasets (into "
                "PPO_DATA_ROOT) an experiment names, and print the command lines to launch it with.")
    p.add_argument("file", help="experiment file (def config() -> fdl.Config)")
    p.add_argument("overrides", nargs="*", metavar="path=value", help="override, e.g. model.path=Qwen/Qwen2.5-7B")
    p.add_argument("--fiddler", action="append", default=[], metavar="F", help="apply the file's fiddler F")
    p.add_argument("--executor", choices=("local", "slurm", "debug"), help="check it as a launch with this executor")
    return p


def _checkpoint_parser(command: str, description: str) -> argparse.ArgumentParser:
    """A command on one checkpoint step of a run: ``RUN_DIR [--step N]``."""
    p = _Parser(prog=f"launch.py {command}", description=description)
    p.add_argument("run_dir", type=Path, help="the run directory")
    p.add_argument("--step", type=int, help="the checkpoint's step (default: the latest complete one)")
    return p


def _export_parser() -> argparse.ArgumentParser:
    p = _checkpoint_parser("export", "Write a checkpoint step of a run as an HF folder that loads on its own "
                           "(transformers, vLLM): the policy, or with --critic the critic with its value head (score). "
                           "Read a layer at a time from the distributed checkpoint, in this process.")
    p.add_argument("--critic", action="store_true", help="the critic (AutoModelForTokenClassification) instead")
    p.add_argument("--out", type=Path, required=True, help="the HF folder to write (must not exist, or be empty)")
    return p


def _eval_parser() -> argparse.ArgumentParser:
    p = _checkpoint_parser("eval", "Evaluate a checkpoint step of a run on held-out problems with vLLM: greedy "
                           "accuracy, and with --samples K avg@K and unbiased pass@k, a per-problem table and every "
                           "answer, written into RUN_DIR/eval/step_N.")
    p.add_argument("--samples", type=int, metavar="K",
                   help="sampled answers per problem besides the greedy one (default: the run's trainer.val_samples)")
    p.add_argument("--dataset", metavar="D", help="the problems: a file or ORG/NAME[@REV][:CONFIG]:SPLIT in the "
                   "run's task format (default: the run's validation set)")
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
        args = _launch_parser().parse_intermixed_args(argv)
        return _launch(args, argv)
    except ConfigError as err:
        print(f"launch.py: {err}", file=sys.stderr)
        return 2


def _run_command(command: str, rest: list[str]) -> int:
    if command == "prepare":
        from ppo.launch.prepare import Request
        from ppo.launch.prepare_command import prepare_inputs

        args = _prepare_parser().parse_intermixed_args(rest)
        return prepare_inputs(Request(args.file, args.overrides, args.fiddler, args.executor))
    if command == "export":
        from ppo.launch.export_command import export_step

        args = _export_parser().parse_args(rest)
        return export_step(args.run_dir, args.out, step=args.step, critic=args.critic)
    if command == "eval":
        from ppo.launch.eval_command import eval_step

        args = _eval_parser().parse_args(rest)
        return eval_step(args.run_dir, step=args.step, samples=args.samples, dataset=args.dataset)
    from ppo.launch import commands

    args = _command_parser(command).parse_args(rest)
    if command == "status":
        return commands.status(args.run_dir, wait=args.wait)
    return getattr(commands, command)(args.run_dir)


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    from ppo.launch.executors import DebugExecutor, LocalExecutor, SlurmExecutor
    from ppo.launch.prepare import Request, prepare
    from ppo.launch.rundir import check_run_dir, default_run_dir, write_run_dir

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
    write_run_dir(prepared, argv, run_dir)
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


def _submit(prepared, args: argparse.Namespace, argv: list[str], run_dir: Path) -> int:
    from ppo.launch.rundir import write_run_dir
    from ppo.launch.slurm import check_submission, submit

    executor = prepared.executor
    what = f"{executor.nodes} node(s) x {executor.gpus_per_node} GPU(s) for {executor.time_minutes} min"
    question = f"submit '{prepared.name}' ({what}, partition {executor.partition or 'default'})? [y/N] "
    git = check_submission(allow_dirty=args.allow_dirty, yes=args.yes, shown_by_dry_run="the script",
                           diff_saved_in="the run directory", subject=what, question=question)
    if git is None:
        print("not submitted")
        return 0
    write_run_dir(prepared, argv, run_dir, git)
    try:
        job_id = submit(executor, prepared.name, run_dir)
    except ConfigError:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    print(f"run directory: {run_dir}\nsubmitted SLURM job {job_id}; follow it with: python launch.py status "
          f"{run_dir} (logs, cancel)")
    return 0
