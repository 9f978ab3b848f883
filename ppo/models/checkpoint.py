"""Save and load a model with its optimizer through Megatron's distributed checkpointing.

A checkpoint directory holds sharded tensors that any tensor/pipeline layout can read back (resharding on load),
plus the trainer's step counter.  Writes are atomic: everything goes to ``<dir>.partial`` and is renamed only
once complete, so a crash during a save leaves the previous checkpoint and never a torn one that could be loaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ppo.models.training import ModelUpdater

PARTIAL_SUFFIX = ".partial"


def _materialize_optimizer_state(trainer: ModelUpdater) -> None:
    """Give every parameter without optimizer state the state a fresh Adam would create on its first step.

    An optimizer that has not stepped yet (a policy during critic warmup, or one whose state was reset after the warm
    start) has no state, and Megatron then saves none; loading expects it and fails.  Zeros with ``step = 0`` are
    exactly what ``torch.optim.Adam`` initialises lazily, so training continues identically.  (Megatron drops a
    zero step when saving — ``if step:`` — so ``_restore_zero_step`` puts it back on load.)
    """
    for chained in getattr(trainer.optimizer, "chained_optimizers", [trainer.optimizer]):
        optimizer = chained.optimizer
        for group in optimizer.param_groups:
            for param in group["params"]:
                if len(optimizer.state[param]) == 0:
                    optimizer.state[param]["step"] = torch.zeros((), dtype=torch.float32)
                    optimizer.state[param]["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    optimizer.state[param]["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


def _restore_zero_step(optimizer_state) -> None:
    """Add ``common_step = 0`` to every optimizer state dict saved without one (see above)."""
    if isinstance(optimizer_state, dict):
        state = optimizer_state.get("state")
        if isinstance(state, dict) and "param_groups" in optimizer_state and state and "common_step" not in state:
            state["common_step"] = torch.zeros((), dtype=torch.float32)
        for value in optimizer_state.values():
            if isinstance(value, (dict, list)):
                _restore_zero_step(value)
    elif isinstance(optimizer_state, list):
        for value in optimizer_state:
            _restore_zero_step(value)


def _sharded_state(trainer: ModelUpdater, *, is_loading: bool) -> dict:
    model_state = trainer.module.sharded_state_dict()
    return {
        "model": model_state,
        "optimizer": trainer.optimizer.sharded_state_dict(model_state, is_loading=is_loading),
    }


def _is_rank_zero() -> bool:
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def _barrier() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


def save_checkpoint(trainer: ModelUpdater, path: str | Path) -> Path:
    """Write the model, the optimizer state and the step counter to ``path`` (collective over all ranks)."""
    from megatron.core import dist_checkpointing

    path = Path(path)
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    if _is_rank_zero():
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    _barrier()
    _materialize_optimizer_state(trainer)
    state = _sharded_state(trainer, is_loading=False)
    state["steps_done"] = trainer.steps_done
    dist_checkpointing.save(state, str(partial))
    _barrier()
    if _is_rank_zero():
        if path.exists():
            shutil.rmtree(path)
        partial.rename(path)
    _barrier()
    return path


def load_checkpoint(trainer: ModelUpdater, path: str | Path) -> None:
    """Restore a ``save_checkpoint`` directory into ``trainer`` (any parallel layout; refuses partial saves)."""
    from megatron.core import dist_checkpointing

    path = Path(path)
    if path.name.endswith(PARTIAL_SUFFIX) or not path.is_dir():
        raise FileNotFoundError(f"no complete checkpoint at {path}")
    state = _sharded_state(trainer, is_loading=True)
    state["steps_done"] = 0
    loaded = dist_checkpointing.load(state, str(path))
    trainer.module.load_state_dict(loaded["model"])
    _restore_zero_step(loaded["optimizer"])
    trainer.optimizer.load_state_dict(loaded["optimizer"])
    trainer.steps_done = int(loaded["steps_done"])
