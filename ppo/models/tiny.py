"""Create small random Hugging Face checkpoints locally (no model hub): for tests and the CPU recipes.

The directory holds ``config.json``, ``model.safetensors`` and the tokenizer files, so Megatron (through
``ppo.models.convert``), ``transformers`` and vLLM all load it.  Heads are 32 wide or more: vLLM's CPU attention
backend supports head sizes 32, 64, 80, … only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

FAMILIES = {
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    "llama": (LlamaConfig, LlamaForCausalLM),
}


def create_tiny_model(
    path: str | Path,
    tokenizer,
    *,
    model_type: str = "qwen2",
    hidden_size: int = 128,
    num_layers: int = 3,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    intermediate_size: int = 384,
    max_position_embeddings: int = 256,
    tie_word_embeddings: bool = True,
    rope_theta: float = 10000.0,
    head_dim: int | None = None,
    rope_scaling: dict | None = None,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised decoder sized for ``tokenizer`` (same seed → same weights) with the tokenizer.

    ``model_type``: ``"qwen2"``, ``"qwen3"`` or ``"llama"``; ``head_dim`` (default ``hidden_size //
    num_attention_heads``) may differ from that, as in Qwen3; ``rope_scaling``: e.g. Llama 3.1's ``{"rope_type":
    "llama3", "factor": 8.0, ...}``.  ``ppo.models.architecture`` decides what the workers can convert.
    """
    if model_type not in FAMILIES:
        raise ValueError(f"model_type must be one of {', '.join(FAMILIES)}, got {model_type!r}")
    if (head_dim or hidden_size // num_attention_heads) < 32:
        raise ValueError(f"head_dim {head_dim or hidden_size // num_attention_heads} < 32: vLLM's CPU backend "
                         f"cannot run it")
    config_cls, model_cls = FAMILIES[model_type]
    explicit = {"head_dim": head_dim} if head_dim else {}  # Qwen2's config has no head_dim field
    config = config_cls(
        **explicit,
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    torch.manual_seed(seed)
    path = Path(path)
    model_cls(config).to(torch.float32).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
