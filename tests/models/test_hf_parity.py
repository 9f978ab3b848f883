"""Megatron-Core models against transformers' forward pass on the same weights (float32, CPU)."""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.convert import hf_to_megatron, load_megatron_state, megatron_to_hf
from ppo.models.forward import full_logits, token_logprobs
from tests.models.conftest import make_hf_model

CASES = [("qwen2", False), ("qwen2", True), ("llama", False), ("llama", True), ("qwen3", False), ("qwen3", True),
         ("llama3", False)]


def megatron_from_hf(hf_model):
    arch = Architecture.from_hf_config(hf_model.config.to_dict())
    model = build_gpt_model(arch)
    load_megatron_state(model, hf_to_megatron(hf_model.state_dict(), arch))
    return model.eval(), arch


def padded_batch(vocab: int, seed: int = 0, length: int = 24):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (3, length), generator=g)
    lengths = torch.tensor([length, 17, 9])
    segments = (torch.arange(length) < lengths[:, None]).long()
    return ids, segments, lengths


@pytest.mark.parametrize("variant,tied", CASES)
def test_logits_equal_transformers(megatron_world, variant, tied):
    hf = make_hf_model(variant, tied=tied)
    model, arch = megatron_from_hf(hf)
    # 128 positions: llama3 RoPE scaling changes only slow frequencies, which 24 positions hardly turn
    ids, segments, lengths = padded_batch(arch.vocab_size, length=128)
    with torch.no_grad():
        ours = full_logits(model, ids, segments)
        theirs = hf(input_ids=ids, attention_mask=segments).logits
    for b, n in enumerate(lengths.tolist()):
        assert (ours[b, :n] - theirs[b, :n]).abs().max().item() <= 1e-4


@pytest.mark.parametrize("variant", sorted({variant for variant, _ in CASES}))
def test_rotary_frequencies_equal_transformers(megatron_world, variant):
    """RoPE's inverse frequencies, llama3 scaling included: the logits of short test sequences barely feel the
    low frequencies that llama3 rescales, these show every one."""
    hf = make_hf_model(variant, tied=False)
    model, _ = megatron_from_hf(hf)
    torch.testing.assert_close(model.rotary_pos_emb.inv_freq, hf.model.rotary_emb.inv_freq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("variant,tied", CASES)
def test_the_memory_plan_counts_the_parameters_megatron_builds(megatron_world, variant, tied):
    from ppo.workers.memory import shard_parameters

    model, arch = megatron_from_hf(make_hf_model(variant, tied=tied))
    assert shard_parameters(arch, 1) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("variant,tied", CASES)
def test_export_round_trips_to_the_same_tensors_and_logits(megatron_world, variant, tied, tmp_path):
    from transformers import AutoModelForCausalLM

    from ppo.models.convert import load_hf_state_dict, save_hf_checkpoint

    hf = make_hf_model(variant, tied=tied)
    model, arch = megatron_from_hf(hf)
    exported = megatron_to_hf([model.state_dict()], arch)
    expected = {k: v for k, v in hf.state_dict().items() if not (tied and k == "lm_head.weight")}
    assert exported.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(exported[name], tensor), name
    path = save_hf_checkpoint(exported, hf.config.to_dict(), tmp_path / "export")
    assert load_hf_state_dict(path).keys() == exported.keys()
    reloaded = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    ids, segments, _ = padded_batch(arch.vocab_size, seed=1)
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids).logits, hf(input_ids=ids).logits, rtol=0, atol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_logprobs_equal_naive_log_softmax(megatron_world, temperature):
    hf = make_hf_model("qwen2", tied=False)
    model, arch = megatron_from_hf(hf)
    ids, segments, lengths = padded_batch(arch.vocab_size)
    with torch.no_grad():
        naive = torch.log_softmax(full_logits(model, ids, segments).float() / temperature, dim=-1)
        naive = naive[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
        for chunk in (1, 5, 64):
            ours = token_logprobs(model, ids, segments, temperature=temperature, chunk_size=chunk)
            assert ours.shape == ids.shape and (ours[:, 0] == 0).all()
            for b, n in enumerate(lengths.tolist()):
                assert (ours[b, 1:n] - naive[b, : n - 1]).abs().max().item() <= 1e-5


def test_unsupported_architecture_is_refused():
    from ppo.models.architecture import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="model_type 'gpt2' is not supported"):
        Architecture.from_hf_config({"model_type": "gpt2"})


def hf_config(variant: str, **changes) -> dict:
    from tests.models.conftest import tiny_hf_config

    return tiny_hf_config(variant, tied=False).to_dict() | changes


def rope(**changes) -> dict:
    from tests.models.conftest import LLAMA3_ROPE

    return {"rope_type": "llama3", "rope_theta": 500000.0, **LLAMA3_ROPE, **changes}


@pytest.mark.parametrize("config, expected", [
    (hf_config("qwen3"), {"head_dim": 64, "qk_layernorm": True, "qkv_bias": False, "rope_scaling_factor": None}),
    (hf_config("qwen2", attention_bias=False), {"head_dim": 32, "qkv_bias": True}),  # Qwen2 ignores attention_bias
    (hf_config("llama3"), {"rope_scaling_factor": 8.0, "rope_theta": 500000.0, "qk_layernorm": False}),
    # the spelling of transformers 4 checkpoints (Llama 3.1's config.json): rope_scaling and a top-level rope_theta
    ({k: v for k, v in hf_config("llama3").items() if k != "rope_parameters"}
     | {"rope_scaling": {k: v for k, v in rope(factor=32.0).items() if k != "rope_theta"}, "rope_theta": 5e5},
     {"rope_scaling_factor": 32.0, "rope_theta": 500000.0}),
    (hf_config("llama", rope_parameters={"rope_type": "default", "rope_theta": 1234.0}),
     {"rope_scaling_factor": None, "rope_theta": 1234.0}),
])
def test_supported_architectures_are_read(config, expected):
    arch = Architecture.from_hf_config(config)
    assert {name: getattr(arch, name) for name in expected} == expected


@pytest.mark.parametrize("config, message", [
    ({"model_type": "mistral"}, "model_type 'mistral' is not supported; supported: qwen2, qwen3, llama"),
    (hf_config("qwen3", use_sliding_window=True, sliding_window=64),
     "use_sliding_window=True is not supported (full attention only)"),
    (hf_config("qwen2", layer_types=["full_attention", "sliding_attention"]),
     "layer_types ['sliding_attention'] are not supported (full attention only)"),
    (hf_config("llama", hidden_act="gelu"), "only SwiGLU (hidden_act='silu') is supported, got 'gelu'"),
    (hf_config("qwen3", attention_bias=True), "attention_bias=True is not supported for qwen3 (o_proj bias)"),
    (hf_config("llama", mlp_bias=True), "mlp_bias=True is not supported"),
    (hf_config("llama3", rope_parameters=rope(rope_type="yarn")),
     "RoPE scaling 'yarn' is not supported (rope_type: default, llama3)"),
    ({k: v for k, v in hf_config("llama").items() if k != "rope_parameters"}
     | {"rope_scaling": {"type": "linear", "factor": 2.0}},
     "RoPE scaling 'linear' is not supported (rope_type: default, llama3)"),
    (hf_config("llama3", rope_parameters=rope(original_max_position_embeddings=64)),
     "RoPE scaling 'llama3' with original_max_position_embeddings=64 is not supported: Megatron-Core computes "
     "llama3 RoPE with original_max_position_embeddings=8192 only"),
    (hf_config("llama3", rope_parameters=rope(low_freq_factor=2.0)),
     "RoPE scaling 'llama3' with low_freq_factor=2.0 is not supported: Megatron-Core computes llama3 RoPE with "
     "low_freq_factor=1.0 only"),
    (hf_config("llama3", rope_parameters=rope(factor=None)),
     "RoPE scaling 'llama3' needs factor >= 1, got factor=None"),
    (hf_config("llama", rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}),
     "partial_rotary_factor=0.5 is not supported (RoPE on whole heads only)"),
])
def test_what_megatron_cannot_compute_is_refused_in_one_line(config, message):
    from ppo.models.architecture import UnsupportedModelError

    with pytest.raises(UnsupportedModelError) as refused:
        Architecture.from_hf_config(config)
    assert str(refused.value) == message
