"""Megatron-Core models against transformers' forward pass on the same weights (float32, CPU)."""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.convert import hf_to_megatron, load_megatron_state, megatron_to_hf
from ppo.models.forward import full_logits, token_logprobs
from tests.models.conftest import make_hf_model

CASES = [("qwen2", False), ("qwen2", True), ("llama", False), ("llama", True)]


def megatron_from_hf(hf_model):
    arch = Architecture.from_hf_config(hf_model.config.to_dict())
    model = build_gpt_model(arch)
    load_megatron_state(model, hf_to_megatron(hf_model.state_dict(), arch))
    return model.eval(), arch


def padded_batch(vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (3, 24), generator=g)
    lengths = torch.tensor([24, 17, 9])
    segments = (torch.arange(24) < lengths[:, None]).long()
    return ids, segments, lengths


@pytest.mark.parametrize("model_type,tied", CASES)
def test_logits_equal_transformers(megatron_world, model_type, tied):
    hf = make_hf_model(model_type, tied=tied)
    model, arch = megatron_from_hf(hf)
    ids, segments, lengths = padded_batch(arch.vocab_size)
    with torch.no_grad():
        ours = full_logits(model, ids, segments)
        theirs = hf(input_ids=ids, attention_mask=segments).logits
    for b, n in enumerate(lengths.tolist()):
        assert (ours[b, :n] - theirs[b, :n]).abs().max().item() <= 1e-4


@pytest.mark.parametrize("model_type,tied", CASES)
def test_export_round_trips_to_the_same_tensors_and_logits(megatron_world, model_type, tied, tmp_path):
    from transformers import AutoModelForCausalLM

    from ppo.models.convert import load_hf_state_dict, save_hf_checkpoint

    hf = make_hf_model(model_type, tied=tied)
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
