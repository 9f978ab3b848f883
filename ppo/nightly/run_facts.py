"""What a finished run directory says about itself, for a night record.

The files are those ``launch.py`` writes before the job starts (:mod:`ppo.launch.rundir` lists them all) and
those the job writes. Only ``metrics.jsonl`` is required; a field whose file is missing or unreadable is ``None``
(a launch refused before its directory was made, or a run made by another launcher):

- ``metrics.jsonl`` (the trainer): the curves and the last step;
- ``config.txt``: the flattened config, kept and hashed (``config.json`` is hashed when there is no ``config.txt``);
- ``versions.json``: ``{package: version}``; packages not installed (``null``) are left out;
- ``launch.json``: ``git_commit`` and ``git_dirty``, the checkout ``launch.py`` ran from;
- ``status.json`` (the job): ``state``, and ``error`` (one line) when the job failed;
- ``wandb.json`` (the trainer's wandb sink): ``url``, ``null`` for an offline run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppo.launch.rundir import git_state, package_versions
from ppo.metrics.loader import last_step as find_last_step
from ppo.metrics.loader import load_metrics
from ppo.metrics.reader import MetricsFormatError, ReferenceLayout
from ppo.metrics.writer import METRICS_FILENAME


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
    job_state: str | None = None
    job_error: str | None = None


def read_run_dir(run_dir: str | Path) -> RunFacts:
    """Everything a record copies from ``run_dir``; ``metrics_problem`` says why ``metrics`` is ``None``."""
    run_dir = Path(run_dir)
    metrics, problem = _read_metrics(run_dir)
    config_text = _read_text(run_dir / "config.txt")
    hashed = config_text.encode("utf-8") if config_text is not None else _read_bytes(run_dir / "config.json")
    launch = _read_object(run_dir / "launch.json") or {}
    status = _read_object(run_dir / "status.json") or {}
    versions = _read_object(run_dir / "versions.json")
    commit, dirty = _launched_from(launch)
    return RunFacts(
        metrics=metrics,
        metrics_problem=problem,
        last_step=find_last_step(metrics) if metrics is not None else None,
        config_text=config_text,
        config_hash=hashlib.sha256(hashed).hexdigest() if hashed is not None else None,
        versions=installed(versions) if versions is not None else None,
        git_commit=commit,
        git_dirty=dirty,
        wandb_url=_string((_read_object(run_dir / "wandb.json") or {}).get("url")),
        job_state=_string(status.get("state")),
        job_error=_string(status.get("error")),
    )


def installed(versions: dict[str, Any]) -> dict[str, str]:
    """``versions`` (as ``versions.json`` holds them) without the packages that are not installed."""
    return {str(k): str(v) for k, v in versions.items() if v is not None}


def checkout_facts() -> tuple[str | None, bool | None, dict[str, str]]:
    """``(commit, dirty, versions)`` as ``launch.py`` would have recorded them here, for a run directory that
    lacks them (a launch refused before its directory was made)."""
    git = git_state()
    return git.commit, git.dirty if git.commit else None, installed(package_versions())


def select_curves(metrics: ReferenceLayout, names: tuple[str, ...] | list[str]) -> dict[str, dict[str, float]]:
    return {name: dict(metrics[name]) for name in dict.fromkeys(names) if name in metrics}


def _read_metrics(run_dir: Path) -> tuple[ReferenceLayout | None, str]:
    if not (run_dir / METRICS_FILENAME).is_file():
        return None, f"no {METRICS_FILENAME} in {run_dir}"
    try:
        return load_metrics(run_dir), ""
    except (OSError, MetricsFormatError) as exc:
        return None, f"unreadable {METRICS_FILENAME}: {exc}"


def _launched_from(launch: dict[str, Any]) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of ``launch.json``; outside a git checkout ``launch.py`` records no commit, and its
    ``git_dirty`` (false) then means nothing."""
    commit, dirty = _string(launch.get("git_commit")), launch.get("git_dirty")
    return commit, dirty if commit and isinstance(dirty, bool) else None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


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
