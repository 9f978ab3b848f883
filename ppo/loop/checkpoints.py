"""Where a run's checkpoints live (torch-free: the launcher's ``export`` and ``eval`` read the same layout).

``<run_dir>/checkpoints/step_NNNNNN/{policy,critic,trainer_state.json}``; a checkpoint is written into
``step_NNNNNN.partial`` and renamed when complete, so a directory without the suffix is always whole."""

from __future__ import annotations

from pathlib import Path

CHECKPOINTS = "checkpoints"
PARTIAL = ".partial"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step:06d}"


def complete_checkpoints(run_dir: Path) -> dict[int, Path]:
    """``{step: its directory}`` of every complete checkpoint of the run, in step order."""
    root = Path(run_dir) / CHECKPOINTS
    found = sorted(root.glob("step_*")) if root.is_dir() else []
    return {int(p.name[len("step_"):]): p for p in found if p.is_dir() and not p.name.endswith(PARTIAL)}
