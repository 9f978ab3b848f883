"""Where a run's checkpoints live, and writing, pruning and reading them (torch-free: the launcher's ``export`` and
``eval`` read the same layout).

``<run_dir>/checkpoints/step_NNNNNN/{policy,critic,trainer_state.json}``; a checkpoint is written into
``step_NNNNNN.partial`` and renamed when complete, so a directory without the suffix is always whole.
``trainer_state.json`` keeps the loop's own state (step, loader, KL controller, bad steps) and the step's
``best_metric``."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

CHECKPOINTS = "checkpoints"
PARTIAL = ".partial"
LOOP_STATE = "trainer_state.json"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step:06d}"


def complete_checkpoints(run_dir: Path) -> dict[int, Path]:
    """``{step: its directory}`` of every complete checkpoint of the run, in step order."""
    root = Path(run_dir) / CHECKPOINTS
    found = sorted(root.glob("step_*")) if root.is_dir() else []
    return {int(p.name[len("step_"):]): p for p in found if p.is_dir() and not p.name.endswith(PARTIAL)}


def latest_checkpoint(run_dir: Path) -> Path | None:
    complete = complete_checkpoints(run_dir)
    return complete[max(complete)] if complete else None


def resume_point(run_dir: Path, resume: str) -> Path | None:
    """Where a run continues from: per ``trainer.resume``, the latest complete checkpoint, a given one, or none."""
    if resume == "never":
        return None
    if resume == "auto":
        return latest_checkpoint(run_dir)
    return latest_checkpoint(run_dir) or Path(resume)


def save_checkpoint(run_dir: Path, step: int, policy, critic, loop_state: dict,
                    extra: Callable[[Path], None] | None = None) -> Path:
    """Write step ``step``'s checkpoint (the groups' models and optimizers, ``loop_state`` as ``trainer_state.json``)
    into ``<dir>.partial`` and rename it when complete (never a torn one).  ``policy``, ``critic``: the
    :mod:`ppo.workers.group` façades, their weights on their devices; ``critic`` None without one.  ``extra(dir)``
    writes more of the loop's state into the checkpoint (the batch in flight, ``ppo.loop.off_policy``)."""
    final = checkpoint_dir(run_dir, step)
    partial = final.with_name(final.name + PARTIAL)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    policy.save(str(partial / "policy"))
    if critic is not None:
        critic.save(str(partial / "critic"))
    (partial / LOOP_STATE).write_text(json.dumps(loop_state))
    if extra is not None:
        extra(partial)
    partial.rename(final)
    return final


def load_checkpoint(path: Path, policy, critic) -> dict:
    """Load the groups' models and optimizers from the checkpoint at ``path``; its loop state."""
    state = json.loads((path / LOOP_STATE).read_text())
    policy.load(str(path / "policy"))
    if critic is not None:
        critic.load(str(path / "critic"))
    return state


def prune_checkpoints(run_dir: Path, *, keep_latest: int, keep_best: int, best_mode: str) -> None:
    """Keep the latest ``keep_latest`` and the best ``keep_best`` (by their ``metric``, higher is better when
    ``best_mode`` is ``"max"``); delete the rest."""
    complete = list(complete_checkpoints(run_dir).values())
    keep = set(complete[-keep_latest:])
    if keep_best:
        scored = [(json.loads((p / LOOP_STATE).read_text()).get("metric"), p) for p in complete]
        scored = [(v, p) for v, p in scored if v is not None and math.isfinite(v)]
        scored.sort(key=lambda vp: vp[0], reverse=best_mode == "max")
        keep |= {p for _, p in scored[:keep_best]}
    for old in complete:
        if old not in keep:
            shutil.rmtree(old, ignore_errors=True)
