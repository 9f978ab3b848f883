"""What a run's Megatron checkpoint holds, read from its metadata alone (no torch, no tensor): for checks before launch.

A ``save_checkpoint`` directory (:mod:`ppo.models.checkpoint`) is a Megatron distributed checkpoint in the
``torch_dist`` format: ``metadata.json`` names the format, and torch.distributed.checkpoint's ``.metadata`` file (a
pickle) lists every stored tensor with its global shape, dtype and the chunks it was saved in.  The tensors are
global whatever tensor-parallel size saved them, so Megatron's loader reshards them into any layout: a checkpoint
saved at TP 2 loads at TP 1 (the saved layout only shows in how a tensor is chunked).

:func:`stored_tensors` reads that pickle with an unpickler that knows none of torch's classes and rebuilds each as a
plain record (``torch.Size`` as a tuple, a dtype as its name), so the launcher checks a resume point against the run's
model without importing torch.  :func:`check_against` compares the stored model tensors with the shapes
:func:`megatron_shapes` derives from the run's :class:`~ppo.models.architecture.Architecture`.
"""

from __future__ import annotations

import io
import json
import pickle
from dataclasses import dataclass
from pathlib import Path

from ppo.models.architecture import Architecture


class CheckpointMismatch(ValueError):
    """A checkpoint the run cannot load; one line."""


@dataclass(frozen=True)
class StoredTensor:
    shape: tuple[int, ...]
    chunks: int  # how many pieces it was saved in (a TP-split tensor: one per TP rank)


class _Record:
    """Stands for any class of torch's inside the pickle: keeps its constructor arguments and state as attributes."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)

    def __setstate__(self, state):
        if isinstance(state, tuple) and all(part is None or isinstance(part, dict) for part in state):
            for part in state:  # (__dict__, __slots__ values)
                self.__dict__.update(part or {})
        elif isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.state = state  # a class's own __getstate__ (TensorProperties: a tuple of its fields)


class _TorchFreeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if module == "torch" and name == "Size":
            return tuple
        if module == "torch":
            return name  # dtypes, layouts and memory formats pickle as the global torch.<name>
        if module.split(".")[0] in ("torch", "megatron"):
            return type(name, (_Record,), {})
        if module in ("builtins", "collections", "copyreg", "_codecs", "pathlib"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected class {module}.{name}")


def stored_tensors(path: str | Path) -> dict[str, StoredTensor]:
    """``{key: StoredTensor}`` of every tensor in the checkpoint directory; ``CheckpointMismatch`` for a directory
    that is not a torch_dist checkpoint or whose metadata cannot be read."""
    path = Path(path)
    try:
        backend = json.loads((path / "metadata.json").read_text()).get("sharded_backend")
    except (OSError, ValueError, AttributeError):
        raise CheckpointMismatch(f"{path} is not a Megatron distributed checkpoint (no readable metadata.json)") \
            from None
    if backend != "torch_dist":
        raise CheckpointMismatch(f"{path} is a {backend!r} checkpoint; the trainer saves and reads torch_dist")
    try:
        metadata = _TorchFreeUnpickler(io.BytesIO((path / ".metadata").read_bytes())).load()
        entries = metadata.state_dict_metadata
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as err:
        raise CheckpointMismatch(f"{path}/.metadata cannot be read ({type(err).__name__}: {err})"[:300]) from None
    return {key: StoredTensor(tuple(meta.size), len(meta.chunks)) for key, meta in entries.items()
            if hasattr(meta, "size") and hasattr(meta, "chunks")}


def megatron_shapes(arch: Architecture, *, value_head: bool = False) -> dict[str, tuple[int, ...]]:
    """The global shapes of the model's main tensors as the trainer stores them (layers stacked on a leading axis);
    enough to tell one model from another."""
    hidden, head, layers = arch.hidden_size, arch.head_dim, arch.num_layers
    q, kv = arch.num_attention_heads * head, arch.num_key_value_heads * head
    shapes = {
        "embedding.word_embeddings.weight": (arch.vocab_size, hidden),
        "decoder.layers.self_attention.linear_qkv.weight": (layers, q + 2 * kv, hidden),
        "decoder.layers.self_attention.linear_proj.weight": (layers, hidden, q),
        "decoder.layers.mlp.linear_fc1.weight": (layers, 2 * arch.ffn_hidden_size, hidden),
        "decoder.layers.mlp.linear_fc2.weight": (layers, hidden, arch.ffn_hidden_size),
    }
    if value_head:
        shapes["output_layer.weight"] = (1, hidden)
    elif not arch.tie_word_embeddings:
        shapes["output_layer.weight"] = (arch.vocab_size, hidden)
    return shapes


def saved_tensor_parallel(stored: dict[str, StoredTensor]) -> int | None:
    """The tensor-parallel size that saved the checkpoint: the chunks of the embedding (split over TP ranks along the
    vocabulary; the layers' tensors are chunked per layer too)."""
    found = stored.get("embedding.word_embeddings.weight")
    return found.chunks if found else None


def check_against(path: str | Path, arch: Architecture, *, value_head: bool = False,
                  what: str = "the run's model") -> dict[str, StoredTensor]:
    """The checkpoint's tensors once every shape :func:`megatron_shapes` gives matches; ``CheckpointMismatch`` (one
    line, naming the first tensor that differs) for a checkpoint of another model."""
    stored = stored_tensors(path)
    for key, shape in megatron_shapes(arch, value_head=value_head).items():
        if key not in stored:
            raise CheckpointMismatch(f"{path} holds no {key}: not a checkpoint of {what}")
        if stored[key].shape != shape:
            raise CheckpointMismatch(f"{path} is a checkpoint of another model: {key} is {list(stored[key].shape)}, "
                                     f"{what} has {list(shape)}")
    return stored
