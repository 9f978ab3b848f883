"""The decoder architecture read from a Hugging Face ``config.json`` (Qwen2, Qwen3 and Llama families).

DeepSeek-R1-Distill-Qwen-7B and Qwen2.5 are Qwen2 (QKV bias); Qwen3 adds a per-head RMSNorm on queries and keys
(before RoPE) and an explicit ``head_dim``; SmolLM-style models and Llama 3.x are Llama (no bias; Llama 3.1+ scales
RoPE with ``rope_type: "llama3"``).

:meth:`Architecture.from_hf_config` is the one place that decides what the workers can convert: the dry run calls it
before launch, and anything else is refused there in one line naming the field (``UnsupportedModelError``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

SUPPORTED = ("qwen2", "qwen3", "llama")
QKV_BIAS = {"qwen2"}  # transformers' Qwen2 always has q/k/v biases (whatever attention_bias says); the others none
QK_NORM = {"qwen3"}  # per-head RMSNorm on queries and keys, before RoPE (Megatron's qk_layernorm)
ROPE_TYPES = ("default", "llama3")
MEGATRON_LLAMA3_ROPE = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
"""The llama3 RoPE parameters megatron-core 0.16.1 computes with: ``GPTModel(rope_scaling=True,
rope_scaling_factor=...)`` passes only the factor to ``RotaryEmbedding._apply_scaling``, whose other arguments keep
these defaults (those of every released Llama 3.1/3.2/3.3)."""


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
    head_dim: int | None = None  # width of one attention head; None: hidden_size // num_attention_heads
    qk_layernorm: bool = False
    rope_scaling_factor: float | None = None  # llama3 RoPE scaling (Megatron's other parameters fixed), None: none

    def __post_init__(self):
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @classmethod
    def from_hf_config(cls, config: dict) -> Architecture:
        model_type = config.get("model_type")
        if model_type not in SUPPORTED:
            raise UnsupportedModelError(
                f"model_type {model_type!r} is not supported; supported: {', '.join(SUPPORTED)}"
            )
        _refuse_unsupported_layers(config, model_type)
        heads = config["num_attention_heads"]
        rope = _rope_parameters(config)
        return cls(
            model_type=model_type,
            vocab_size=config["vocab_size"],
            hidden_size=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=config.get("num_key_value_heads") or heads,
            ffn_hidden_size=config["intermediate_size"],
            rms_norm_eps=config.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0),
            max_position_embeddings=config.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=model_type in QKV_BIAS,
            head_dim=config.get("head_dim") or config["hidden_size"] // heads,
            qk_layernorm=model_type in QK_NORM,
            rope_scaling_factor=_llama3_rope_factor(rope),
        )

    @classmethod
    def from_pretrained(cls, path: str | Path) -> Architecture:
        config_file = Path(path) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"no Hugging Face config.json in {path}")
        return cls.from_hf_config(json.loads(config_file.read_text()))


def _refuse_unsupported_layers(config: dict, model_type: str) -> None:
    """One line for a layer the Megatron model would not compute as transformers does: another activation, biases
    Megatron's ``add_qkv_bias`` does not cover (Llama/Qwen3 ``attention_bias`` also biases ``o_proj``), sliding-window
    attention."""
    if config.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"only SwiGLU (hidden_act='silu') is supported, got {config['hidden_act']!r}")
    if model_type not in QKV_BIAS and config.get("attention_bias"):
        raise UnsupportedModelError(f"attention_bias=True is not supported for {model_type} (o_proj bias)")
    if config.get("mlp_bias"):
        raise UnsupportedModelError("mlp_bias=True is not supported")
    if config.get("use_sliding_window"):
        raise UnsupportedModelError("use_sliding_window=True is not supported (full attention only)")
    other_layers = sorted(set(config.get("layer_types") or []) - {"full_attention"})
    if other_layers:
        raise UnsupportedModelError(f"layer_types {other_layers} are not supported (full attention only)")


def _rope_parameters(config: dict) -> dict:
    """The RoPE settings under either spelling: transformers 5's ``rope_parameters`` (``rope_theta`` inside) or the
    older ``rope_scaling`` (``rope_theta`` at the top level); ``type`` is the older name of ``rope_type``, and
    ``partial_rotary_factor`` may sit at the top level too."""
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if "rope_type" not in rope and "type" in rope:
        rope["rope_type"] = rope["type"]
    if "partial_rotary_factor" in config:
        rope.setdefault("partial_rotary_factor", config["partial_rotary_factor"])
    return rope


def _llama3_rope_factor(rope: dict) -> float | None:
    """Megatron's ``rope_scaling_factor`` for these RoPE settings (None: unscaled RoPE); one line for anything
    Megatron cannot compute."""
    rope_type = rope.get("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        raise UnsupportedModelError(
            f"RoPE scaling {rope_type!r} is not supported (rope_type: {', '.join(ROPE_TYPES)})")
    partial = rope.get("partial_rotary_factor", 1.0)
    if partial != 1.0:
        raise UnsupportedModelError(f"partial_rotary_factor={partial!r} is not supported (RoPE on whole heads only)")
    if rope_type == "default":
        return None
    factor = rope.get("factor")
    if not isinstance(factor, (int, float)) or factor < 1:
        raise UnsupportedModelError(f"RoPE scaling 'llama3' needs factor >= 1, got factor={factor!r}")
    for name, megatron_value in MEGATRON_LLAMA3_ROPE.items():
        if rope.get(name) != megatron_value:
            raise UnsupportedModelError(
                f"RoPE scaling 'llama3' with {name}={rope.get(name)!r} is not supported: Megatron-Core computes "
                f"llama3 RoPE with {name}={megatron_value!r} only")
    return float(factor)
