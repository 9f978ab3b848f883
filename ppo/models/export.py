"""Writing a model the workers hold as a local HF checkpoint directory (``python launch.py ... critic.model_path=``).

The directory is the run's initial model directory (config, tokenizer, generation settings) with the weights
replaced: ``model.safetensors`` in HF names.  A critic's export holds the backbone and ``score.weight`` (the value
head, named as HF's token-classification heads name it); the critic loader reads both back, and a policy loader reads
the backbone and ignores the head.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import save

from ppo.atomic import write_bytes_atomic

WEIGHTS = "model.safetensors"


def save_weights(state: dict, path: str | Path) -> None:
    """``state`` (names → tensors) as one safetensors file at ``path``, written atomically; each tensor is copied
    contiguous first, since exported tied weights may share memory, which safetensors refuses."""
    write_bytes_atomic(path, save({k: v.detach().clone().contiguous() for k, v in state.items()}))


def write_hf_export(state: dict, like: str | Path, out: str | Path) -> Path:
    """Write ``state`` (HF names → tensors) as ``out``, with every non-weight file of the HF directory ``like``;
    written to ``out.partial`` and renamed, so a crash never leaves a half-written export.  ``config.json`` says
    how many layers ``state`` holds (a critic with ``critic.num_layers`` keeps fewer than ``like``)."""
    out, like = Path(out), Path(like)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for item in like.iterdir():
        weights = item.name.endswith((".safetensors", ".bin")) or item.name == "model.safetensors.index.json"
        if item.is_file() and not weights:
            shutil.copy2(item, partial / item.name)
    layers = len({name.split(".")[2] for name in state if name.startswith("model.layers.")})
    config = json.loads((partial / "config.json").read_text()) if (partial / "config.json").is_file() else None
    if config is not None and layers and config.get("num_hidden_layers") != layers:
        config["num_hidden_layers"] = layers
        if isinstance(config.get("layer_types"), list):  # per-layer attention kinds (transformers checks the count)
            config["layer_types"] = config["layer_types"][:layers]
        (partial / "config.json").write_text(json.dumps(config, indent=2))
    save_weights(state, partial / WEIGHTS)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out
