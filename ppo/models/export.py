"""Writing a model as a local HF checkpoint directory (``python launch.py ... critic.model_path=``, ``launch.py
export``).

The directory is the run's initial model directory (config, tokenizer, generation settings) with the weights
replaced, in HF names: ``model.safetensors``, or ``model-0000k-of-0000n.safetensors`` files and HF's
``model.safetensors.index.json`` when the weights come in pieces that fill more than one file.  A critic's export
holds the backbone and ``score.weight`` (the value head, named as HF's token-classification heads name it, and its
``config.json`` says so: one label, no bias, so that ``AutoModelForTokenClassification`` loads it as it is); the
critic loader reads both back, and a policy loader reads the backbone and ignores the head.

:func:`export_checkpoint` writes one from a distributed checkpoint, a layer at a time (:mod:`ppo.models.checkpoint`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from safetensors.torch import save, save_file

from ppo.atomic import write_bytes_atomic
from ppo.models.architecture import Architecture
from ppo.models.convert import HF_VALUE_HEAD

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
SHARD_BYTES = 2 << 30
"""How much of the weights one file of a piecewise export holds (a piece is never split): what the writer keeps in
memory besides the piece it converts."""


def save_weights(state: dict, path: str | Path) -> None:
    """``state`` (names → tensors) as one safetensors file at ``path``, written atomically; each tensor is copied
    contiguous first, since exported tied weights may share memory, which safetensors refuses."""
    write_bytes_atomic(path, save({k: v.detach().clone().contiguous() for k, v in state.items()}))


def write_hf_export(state: dict | Iterable[dict], like: str | Path, out: str | Path,
                    shard_bytes: int | None = None) -> Path:
    """Write ``state`` (HF names → tensors, or an iterable of such pieces, converted as they come) as ``out``, with
    every non-weight file of the HF directory ``like``; written to ``out.partial`` and renamed, so a crash never
    leaves a half-written export.  Pieces fill files of up to ``shard_bytes`` (default :data:`SHARD_BYTES`).
    ``config.json`` says how many layers the weights hold (a critic with ``critic.num_layers`` keeps fewer than
    ``like``) and, for a critic, that its head is a one-label token classifier."""
    out, like = Path(out), Path(like)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for item in like.iterdir():
        weights = item.name.endswith((".safetensors", ".bin")) or item.name == INDEX
        if item.is_file() and not weights:
            shutil.copy2(item, partial / item.name)
    names = _write_weights([state] if isinstance(state, dict) else state, partial, shard_bytes or SHARD_BYTES)
    if (partial / "config.json").is_file():
        config = json.loads((partial / "config.json").read_text())
        (partial / "config.json").write_text(json.dumps(_described(config, names), indent=2))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def _write_weights(pieces: Iterable[dict], folder: Path, shard_bytes: int) -> list[str]:
    """The pieces as safetensors files in ``folder`` (one file: ``model.safetensors``); returns the names written.
    Each tensor is copied contiguous as it comes (views of one tensor share memory, which safetensors refuses)."""
    files: list[list[str]] = []
    pending: dict[str, torch.Tensor] = {}
    held = total = 0

    def flush() -> None:
        save_file(pending, str(folder / f"part-{len(files)}.safetensors"), metadata={"format": "pt"})
        files.append(list(pending))
        pending.clear()

    for piece in pieces:
        size = sum(t.numel() * t.element_size() for t in piece.values())
        if pending and held + size > shard_bytes:
            flush()
            held = 0
        pending.update({name: t.detach().cpu().clone().contiguous() for name, t in piece.items()})
        held, total = held + size, total + size
    if pending or not files:
        flush()
    if len(files) == 1:
        (folder / "part-0.safetensors").rename(folder / WEIGHTS)
        return files[0]
    weight_map = {}
    for k, names in enumerate(files):
        name = f"model-{k + 1:05d}-of-{len(files):05d}.safetensors"
        (folder / f"part-{k}.safetensors").rename(folder / name)
        weight_map.update(dict.fromkeys(names, name))
    (folder / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return list(weight_map)


def _described(config: dict, names: list[str]) -> dict:
    """``config`` saying how many layers ``names`` hold, and for a critic that ``score`` is its one-label head."""
    layers = len({name.split(".")[2] for name in names if name.startswith("model.layers.")})
    if layers and config.get("num_hidden_layers") != layers:
        config["num_hidden_layers"] = layers
        if isinstance(config.get("layer_types"), list):  # per-layer attention kinds (transformers checks the count)
            config["layer_types"] = config["layer_types"][:layers]
    if HF_VALUE_HEAD in names:
        config.pop("num_labels", None)
        config.update(id2label={"0": "value"}, label2id={"value": 0}, token_classification_bias=False,
                      architectures=[a.replace("ForCausalLM", "ForTokenClassification")
                                     for a in config.get("architectures") or []])
    return config


def hf_pieces(checkpoint: str | Path, arch: Architecture, *, value_head: bool = False) -> Iterator[dict]:
    """The model of a ``save_checkpoint`` directory in HF names, a piece (the embedding, a layer, the head) at a
    time (:func:`ppo.models.checkpoint.model_pieces`)."""
    from ppo.models.checkpoint import model_pieces
    from ppo.models.convert import megatron_to_hf

    for piece in model_pieces(checkpoint):
        yield megatron_to_hf([piece], arch, value_head=value_head)


def export_checkpoint(checkpoint: str | Path, like: str | Path, out: str | Path, *, value_head: bool = False) -> Path:
    """The model of a ``save_checkpoint`` directory (a policy, or with ``value_head`` a critic) as the HF directory
    ``out``, beside the non-weight files of ``like`` (the HF model it was built from).  Memory: one file's worth
    (:data:`SHARD_BYTES`) and the piece being converted, never the whole model."""
    arch = Architecture.from_pretrained(like)
    return write_hf_export(hf_pieces(checkpoint, arch, value_head=value_head), like, out)
