"""Save and load a model with its optimizer through Megatron's distributed checkpointing.

A checkpoint directory holds sharded tensors that any tensor/pipeline layout can read back (resharding on load),
plus the updater's step counter.  Writes are atomic: everything goes to ``<dir>.partial`` and is renamed only
once complete, so a crash during a save leaves the previous checkpoint and never a torn one that could be loaded.

:func:`model_pieces` reads the model's weights back without a model, one layer at a time (``launch.py export``).
"""

from __future__ import annotations

import queue
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ppo.models.training import ModelUpdater

PARTIAL_SUFFIX = ".partial"
MODEL_PREFIXES = ("embedding.", "decoder.", "output_layer.")
"""The stored keys of the model's weights (the rest is the optimizer's state)."""
LAYERS = "decoder.layers."


def _materialize_optimizer_state(updater: ModelUpdater) -> None:
    """Give every parameter without optimizer state the state a fresh Adam would create on its first step.

    An optimizer that has not stepped yet (a policy during critic warmup, or one whose state was reset after the warm
    start) has no state, and Megatron then saves none; loading expects it and fails.  Zeros with ``step = 0`` are
    exactly what ``torch.optim.Adam`` initialises lazily, so training continues identically.  (Megatron drops a
    zero step when saving — ``if step:`` — so ``_restore_zero_step`` puts it back on load.)
    """
    for chained in getattr(updater.optimizer, "chained_optimizers", [updater.optimizer]):
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


def _sharded_state(updater: ModelUpdater, *, is_loading: bool) -> dict:
    model_state = updater.module.sharded_state_dict()
    return {
        "model": model_state,
        "optimizer": updater.optimizer.sharded_state_dict(model_state, is_loading=is_loading),
    }


def _is_rank_zero() -> bool:
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def _barrier() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


def _write_results_in_this_process() -> None:
    """Give Megatron's checkpoint writer an in-process queue for its write results.

    Its ``torch_dist`` writer hands the results back through a queue made once per process, a ``multiprocessing``
    Manager's started with ``spawn`` (a new Python interpreter importing the worker's main module: 4.2 s of a rank's
    first save on the 2-core CI machine, for a 0.6M-parameter model whose later saves take 0.2 s), so that an
    asynchronous save's writer process could reach it.  Our saves are synchronous: the results are put and taken
    in this process, where a thread-safe queue serves."""
    from megatron.core.dist_checkpointing.strategies import filesystem_async

    if not hasattr(filesystem_async, "_results_queue"):
        raise RuntimeError("megatron-core's checkpoint writer changed (no filesystem_async._results_queue): "
                           "ppo.models.checkpoint needs the megatron-core version the locks name")
    if not isinstance(filesystem_async._results_queue, queue.Queue):
        filesystem_async._results_queue = queue.Queue()


def save_checkpoint(updater: ModelUpdater, path: str | Path) -> Path:
    """Write the model, the optimizer state and the step counter to ``path`` (collective over all ranks)."""
    from megatron.core import dist_checkpointing

    _write_results_in_this_process()

    path = Path(path)
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    if _is_rank_zero():
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    _barrier()
    _materialize_optimizer_state(updater)
    state = _sharded_state(updater, is_loading=False)
    state["steps_done"] = updater.steps_done
    dist_checkpointing.save(state, str(partial))
    _barrier()
    if _is_rank_zero():
        if path.exists():
            shutil.rmtree(path)
        partial.rename(path)
    _barrier()
    return path


def _complete(path: str | Path) -> Path:
    path = Path(path)
    if path.name.endswith(PARTIAL_SUFFIX) or not path.is_dir():
        raise FileNotFoundError(f"no complete checkpoint at {path}")
    return path


def load_checkpoint(updater: ModelUpdater, path: str | Path) -> None:
    """Restore a ``save_checkpoint`` directory into ``updater`` (any parallel layout; refuses partial saves)."""
    from megatron.core import dist_checkpointing

    path = _complete(path)
    state = _sharded_state(updater, is_loading=True)
    state["steps_done"] = 0
    loaded = dist_checkpointing.load(state, str(path))
    updater.module.load_state_dict(loaded["model"])
    _restore_zero_step(loaded["optimizer"])
    updater.optimizer.load_state_dict(loaded["optimizer"])
    updater.steps_done = int(loaded["steps_done"])


@contextmanager
def _world() -> Iterator[None]:
    """Megatron's loader needs a torch.distributed world: a process without one gets a world of one for the block
    (gloo over an in-memory store: no port)."""
    if torch.distributed.is_initialized():
        yield
        return
    torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()


def model_pieces(path: str | Path) -> Iterator[dict[str, torch.Tensor]]:
    """The model's weights in a ``save_checkpoint`` directory, a piece at a time and without building a model: the
    embedding, each transformer layer in turn (named as in the model's state dict, ``decoder.layers.<i>.…`` with
    the global index ``i``), then the final norm and the output layer (a critic's value head).

    The stored tensors are global, whatever tensor/pipeline layout saved them (the layers stacked along a leading
    axis, ``linear_fc1`` as ``[gate; up]``), and Megatron reads only the stored shards a requested slice overlaps:
    the memory this takes is that of the largest piece (a layer, or the embedding), never the whole model, and the
    optimizer's state is not read.  For one process, in a world of one (its own for the block if it has none).
    """
    from megatron.core import dist_checkpointing

    path = _complete(path)
    with _world():
        stored = {key: meta for key, meta in dist_checkpointing.load_tensors_metadata(str(path)).items()
                  if key.startswith(MODEL_PREFIXES)}
        layered = [key for key in stored if key.startswith(LAYERS)]
        yield _read(path, stored, [key for key in stored if key.startswith("embedding.")])
        for layer in range(stored[layered[0]].global_shape[0] if layered else 0):
            yield _read(path, stored, layered, layer)
        yield _read(path, stored, [key for key in stored if not key.startswith(("embedding.", LAYERS))])


def _read(path: Path, stored: dict, keys: Iterable[str], layer: int | None = None) -> dict[str, torch.Tensor]:
    """``keys`` whole, or their slice ``layer`` of the stacked layers (then named ``decoder.layers.<layer>.…``)."""
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor

    request = {}
    for key in keys:
        shape, dtype = stored[key].global_shape, stored[key].dtype
        if layer is None:
            request[key] = ShardedTensor.from_rank_offsets(key, torch.empty(shape, dtype=dtype))
        else:  # one slice [1, ...] at offset `layer` of the leading axis
            request[key] = ShardedTensor.from_rank_offsets(key, torch.empty((1, *shape[1:]), dtype=dtype),
                                                           (0, layer, shape[0]))
    if not request:
        return {}
    loaded = dist_checkpointing.load(request, str(path), validate_access_integrity=False)
    if layer is None:
        return {key: loaded[key] for key in request}
    return {f"{LAYERS}{layer}.{key[len(LAYERS):]}": loaded[key][0] for key in request}
