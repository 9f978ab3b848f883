"""Where a run's initial weights come from: an existing Hugging Face checkpoint, or a small random model that the
run creates (the embedded CPU default cannot download one).

``check()`` checks the settings alone; ``missing_paths()`` lists what is not on this machine's filesystem, one
line each, because a checkpoint may be a path on a cluster that is not here (see ``Experiment.missing_paths``).

A checkpoint may be named by its hub id instead (``Qwen/Qwen2.5-1.5B``, ``Qwen/Qwen2.5-1.5B@<revision>``;
:mod:`ppo.models.hub`): the launcher fetches it into the HF cache and the run's stored config names the snapshot
folder (:mod:`ppo.launch.fetch`).  Until then the cached snapshot, if any, is read where the folder would be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ppo.models.architecture import SUPPORTED, Architecture
from ppo.models.hub import cached_model, parse_model_id

SHAPE_FIELDS = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers", "vocab_size")


@dataclass
class HFCheckpoint:
    """A HF checkpoint (config.json, safetensors, tokenizer): a local directory, or a hub id (``org/name[@revision]``).

    ``config``: the checkpoint's ``config.json`` fields as the recipe knows them (from the model's hub page), so a
    dry run on a host without the checkpoint can still check layouts against the model's shape and plan its memory;
    the file itself wins wherever it can be read.
    """

    HUB_FIELDS = {"path": "model"}

    path: str
    config: dict | None = None

    def check(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("model path is empty: give the directory of a HF checkpoint (config.json, weights) or a "
                             "hub id (org/name)")

    def local_path(self) -> Path | None:
        """The folder the checkpoint is in here: ``path``, or a hub id's cached snapshot (None when not cached)."""
        model = parse_model_id(self.path)
        return Path(self.path) if model is None else cached_model(model)

    def missing_paths(self) -> list[str]:
        if parse_model_id(self.path) is not None or (Path(self.path) / "config.json").is_file():
            return []  # a hub id is the launcher's to fetch
        return [f"model path {self.path} has no config.json (a local HF checkpoint directory, or a hub id org/name, "
                "is needed)"]

    def materialize(self, run_dir: Path, task) -> Path:
        folder = self.local_path()
        if folder is None:
            raise FileNotFoundError(f"model {self.path} is not in the HF cache: launch.py fetches hub ids before a "
                                    "run starts (python launch.py prepare FILE)")
        return folder

    def hf_config(self) -> tuple[dict, str] | None:
        """``(config.json's fields, where they came from)``: the file when it can be read here, else the recipe's
        ``config``, else None."""
        folder = self.local_path()
        try:
            return json.loads((folder / "config.json").read_text()), "config.json"
        except (OSError, ValueError, TypeError):  # TypeError: no folder (a hub id not in the cache)
            return (dict(self.config), "the recipe") if self.config else None

    def shape(self, task) -> dict | None:
        """The fields of ``config.json`` that parallel layouts depend on, when known here (else None)."""
        found = self.hf_config()
        if found is None:
            return None
        data = found[0]
        return {name: data.get(name) for name in SHAPE_FIELDS} | {
            "num_key_value_heads": data.get("num_key_value_heads") or data.get("num_attention_heads")}

    def architecture(self, task) -> tuple[Architecture, str] | None:
        """The decoder's :class:`Architecture` and its source, when known here; raises ``UnsupportedModelError`` for
        a model the workers cannot convert."""
        found = self.hf_config()
        return None if found is None else (Architecture.from_hf_config(found[0]), found[1])


@dataclass
class TinyRandomModel:
    """A randomly initialised Qwen2/Qwen3/Llama decoder sized for the task's tokenizer, written into the run
    directory (``ppo.models.tiny``)."""

    model_type: str = "qwen2"
    hidden_size: int = 128
    num_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 384
    max_position_embeddings: int = 64
    seed: int = 0

    def check(self) -> None:
        if self.model_type not in SUPPORTED:
            raise ValueError(f"TinyRandomModel.model_type must be one of {', '.join(SUPPORTED)}, got "
                             f"{self.model_type!r}")
        if self.hidden_size // self.num_attention_heads < 32:
            raise ValueError("TinyRandomModel needs hidden_size / num_attention_heads >= 32 (vLLM-cpu head sizes)")

    def missing_paths(self) -> list[str]:
        return []  # created in the run directory

    def architecture(self, task) -> tuple[Architecture, str] | None:
        """The :class:`Architecture` of the model the run will create, when its vocabulary is known here."""
        shape = self.shape(task)
        if shape["vocab_size"] is None:
            return None
        config = {  # the config.json that ppo.models.tiny.create_tiny_model writes
            "model_type": self.model_type, "vocab_size": shape["vocab_size"], "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers, "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "intermediate_size": self.intermediate_size,
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": True}
        return Architecture.from_hf_config(config), "the recipe"

    def shape(self, task) -> dict:
        """The shape of the model the run will create (the vocabulary is the task tokenizer's, when known here)."""
        vocab = task.vocab_size() if hasattr(task, "vocab_size") else None
        return {"num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
                "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
                "vocab_size": vocab}

    def materialize(self, run_dir: Path, task) -> Path:
        from ppo.models.tiny import create_tiny_model

        path = Path(run_dir) / "initial_model"
        if not (path / "model.safetensors").is_file():
            create_tiny_model(
                path, task.build_tokenizer(), model_type=self.model_type, hidden_size=self.hidden_size,
                num_layers=self.num_layers, num_attention_heads=self.num_attention_heads,
                num_key_value_heads=self.num_key_value_heads, intermediate_size=self.intermediate_size,
                max_position_embeddings=self.max_position_embeddings, seed=self.seed,
            )
        return path
