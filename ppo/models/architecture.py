"""The decoder architecture read from a Hugging Face ``config.json`` (Qwen2 and Llama families).

DeepSeek-R1-Distill-Qwen-7B and Qwen2.5 are Qwen2 (QKV bias); SmolLM-style models are Llama (no bias).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SUPPORTED = {"qwen2": True, "llama": False}  # model_type -> has QKV bias


class UnsupportedModelError(ValueError):
    pass


@dataclass(frozen=True)
class Architecture:
    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    ffn_hidden_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_hf_config(cls, config: dict) -> Architecture:
        model_type = config.get("model_type")
        if model_type not in SUPPORTED:
            raise UnsupportedModelError(
                f"model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED)}"
            )
        if config.get("hidden_act", "silu") != "silu":
            raise UnsupportedModelError(f"only SwiGLU (hidden_act='silu') is supported, got {config['hidden_act']!r}")
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        if head_dim * heads != config["hidden_size"]:
            raise UnsupportedModelError("head_dim × num_attention_heads must equal hidden_size")
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise UnsupportedModelError(f"RoPE scaling {rope.get('rope_type', rope.get('type'))!r} is not supported")
        rope_theta = config.get("rope_theta") or (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        return cls(
            model_type=model_type,
            vocab_size=config["vocab_size"],
            hidden_size=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=config.get("num_key_value_heads") or heads,
            ffn_hidden_size=config["intermediate_size"],
            rms_norm_eps=config.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope_theta),
            max_position_embeddings=config.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=config.get("attention_bias", SUPPORTED[model_type]),
        )

    @classmethod
    def from_pretrained(cls, path: str | Path) -> Architecture:
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no Hugging Face config.json in {path}")
        return cls.from_hf_config(json.loads(config_file.read_text()))
