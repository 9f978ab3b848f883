"""Activation recomputation trades memory for compute and must not change the math: the same loss and the same
gradient for every parameter, with each setting, on the policy's logprobs and the critic's values."""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.convert import hf_to_megatron, load_megatron_state
from ppo.models.forward import token_logprobs
from ppo.models.recompute import Recompute
from ppo.models.value import build_value_model, token_values
from tests.models.conftest import make_hf_model
from tests.models.test_hf_parity import padded_batch

SETTINGS = [Recompute("selective"), Recompute("full", "uniform", 1), Recompute("full", "uniform", 2),
            Recompute("full", "block", 1)]


def loss_and_grads(hf, *, critic: bool, recompute: Recompute):
    arch = Architecture.from_hf_config(hf.config.to_dict())
    build = build_value_model if critic else build_gpt_model
    model = build(arch, recompute=recompute)
    load_megatron_state(model, hf_to_megatron(hf.state_dict(), arch, value_head=critic),
                        optional=("output_layer.weight",) if critic else ())
    if critic:
        torch.manual_seed(0)
        torch.nn.init.normal_(model.output_layer.weight)
    model.train()  # recomputation only happens in training mode
    ids, segments, _ = padded_batch(arch.vocab_size)
    out = (token_values if critic else token_logprobs)(model, ids, segments)
    loss = (out * segments).square().sum() if critic else -(out * segments).sum()
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("critic", [False, True], ids=["policy", "critic"])
def test_recompute_gives_the_same_loss_and_gradients(megatron_world, critic):
    hf = make_hf_model("qwen2", tied=False, seed=5)
    loss, grads = loss_and_grads(hf, critic=critic, recompute=Recompute())
    for recompute in SETTINGS:
        loss_r, grads_r = loss_and_grads(hf, critic=critic, recompute=recompute)
        torch.testing.assert_close(loss_r, loss, rtol=0, atol=0, msg=f"{recompute}")
        assert grads_r.keys() == grads.keys()
        for name in grads:
            torch.testing.assert_close(grads_r[name], grads[name], rtol=1e-6, atol=1e-7, msg=f"{recompute}: {name}")


def test_recompute_reaches_megatron(megatron_world):
    hf = make_hf_model("qwen2", tied=False)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    config = build_gpt_model(arch, recompute=Recompute("full", "block", 1)).config
    assert (config.recompute_granularity, config.recompute_method, config.recompute_num_layers) == ("full", "block", 1)
    assert build_gpt_model(arch).config.recompute_granularity is None


@pytest.mark.parametrize("recompute, calls", [(Recompute(), 1), (Recompute("full", "uniform", 1), 2),
                                              (Recompute("full", "block", 1), 2)])
def test_full_recompute_runs_the_layer_again_in_backward(megatron_world, recompute, calls):
    """The settings are not a no-op: under full recompute the first layer's forward runs again during backward."""
    hf = make_hf_model("qwen2", tied=False)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    model = build_gpt_model(arch, recompute=recompute).train()
    seen = []
    model.decoder.layers[0].register_forward_hook(lambda *_: seen.append(1))
    ids, segments, _ = padded_batch(arch.vocab_size)
    token_logprobs(model, ids, segments).sum().backward()
    assert len(seen) == calls
