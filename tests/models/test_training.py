"""Training steps on the real Megatron optimizer: the critic learns a regression, micro-batching is exact,
NaN gradients are skipped."""

import math

import pytest
import torch

from ppo.algorithms.critic_loss import value_loss
from ppo.algorithms.policy_loss import clipped_pg_loss
from ppo.models.forward import token_logprobs
from ppo.models.optim import OptimizerSettings, learning_rate
from ppo.models.training import ModelUpdater
from ppo.models.value import build_value_model, token_values
from tests.models.conftest import make_hf_model
from tests.models.test_hf_parity import megatron_from_hf


def critic_batch(vocab: int, seed: int = 0):
    """Toy returns: the value of a token is 1 if the previous token id is even, else −1 (learnable from the prefix)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (8, 16), generator=g)
    segments = torch.ones_like(ids)
    returns = torch.zeros(8, 16)
    returns[:, 1:] = (ids[:, :-1] % 2 == 0).float() * 2 - 1
    mask = torch.ones(8, 16)
    mask[:, 0] = 0
    return {"input_ids": ids, "segment_ids": segments, "returns": returns, "mask": mask}


def critic_settings():
    return OptimizerSettings(lr=1e-3, warmup_steps=3, schedule="cosine", decay_steps=10)


def critic_loss(batch, n_tokens):
    def loss_fn(module, mb):
        values = token_values(module, mb["input_ids"], mb["segment_ids"])
        return value_loss(values, values.detach(), mb["returns"], mb["mask"], clip_range=None,
                          global_valid_toks=n_tokens)
    return loss_fn


@pytest.mark.slow
def test_value_model_learns_a_toy_regression(megatron_world):
    from ppo.models.architecture import Architecture
    from ppo.models.convert import hf_to_megatron, load_megatron_state

    hf = make_hf_model("qwen2", tied=False, seed=11)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    critic = build_value_model(arch)
    load_megatron_state(critic, hf_to_megatron(hf.state_dict(), arch, value_head=True),
                        optional=("output_layer.weight",))
    trainer = ModelUpdater(critic, OptimizerSettings(lr=3e-3, warmup_steps=10, clip_grad=1.0))
    batch = critic_batch(arch.vocab_size)
    loss_fn = critic_loss(batch, batch["mask"].sum())
    losses = [trainer.step([batch], loss_fn)["loss"] for _ in range(150)]
    assert losses[-1] * 10 <= losses[0], (losses[0], losses[-1])
    assert trainer.steps_done == 150


def test_microbatched_step_equals_full_batch_step(megatron_world):
    """The same accumulated gradient (Megatron's main_grad buffers), loss and norm for one micro-batch or four.

    (Parameters after Adam's first step are not compared: Adam's update is ~lr·sign(g), which turns float32
    summation-order noise in near-zero gradients into lr-sized differences.)"""
    hf = make_hf_model("llama", tied=True, seed=2)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, hf.config.vocab_size, (4, 12), generator=g)
    batch = {"input_ids": ids, "segment_ids": torch.ones_like(ids), "advantages": torch.randn(4, 12, generator=g),
             "mask": (torch.rand(4, 12, generator=g) > 0.3).float()}
    n_tokens = batch["mask"].sum()

    def loss_fn(module, mb):
        logp = token_logprobs(module, mb["input_ids"], mb["segment_ids"], chunk_size=5)
        return clipped_pg_loss(logp, logp.detach() - 0.05, mb["advantages"], mb["mask"], global_valid_toks=n_tokens)

    results = []
    for splits in ([slice(0, 4)], [slice(i, i + 1) for i in range(4)]):
        model, _ = megatron_from_hf(hf)
        trainer = ModelUpdater(model, OptimizerSettings(lr=1e-3, clip_grad=0.0))
        metrics = trainer.step([{k: v[s] for k, v in batch.items()} for s in splits], loss_fn)
        results.append(({k: p.main_grad.detach().clone() for k, p in model.named_parameters()}, metrics))
    (full, full_metrics), (micro, micro_metrics) = results
    assert full_metrics["grad_norm"] == pytest.approx(micro_metrics["grad_norm"], rel=1e-5)
    assert full_metrics["loss"] == pytest.approx(micro_metrics["loss"], rel=1e-5)
    for name in full:
        assert full[name].abs().max() > 0, name
        error = (micro[name] - full[name]).abs().max().item()
        assert error <= 1e-5 * full[name].abs().max().item(), (name, error)


def test_nan_gradient_skips_the_update(megatron_world):
    hf = make_hf_model("qwen2", tied=True, seed=3)
    model, arch = megatron_from_hf(hf)
    trainer = ModelUpdater(model, OptimizerSettings(lr=1e-2))
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    batch = critic_batch(arch.vocab_size)

    def nan_loss(module, mb):
        logp = token_logprobs(module, mb["input_ids"], mb["segment_ids"])
        return (logp * float("nan")).sum(), {}

    metrics = trainer.step([batch], nan_loss)
    assert metrics["skipped"] == 1.0 and not math.isfinite(metrics["grad_norm"])
    assert trainer.steps_done == 0
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


def test_schedules():
    s = OptimizerSettings(lr=1.0, min_lr=0.1, warmup_steps=4, schedule="cosine", decay_steps=14)
    assert [learning_rate(s, i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert learning_rate(s, 9) == pytest.approx(0.55)
    assert learning_rate(s, 14) == pytest.approx(0.1) and learning_rate(s, 100) == pytest.approx(0.1)
    linear = OptimizerSettings(lr=1.0, schedule="linear", decay_steps=10)
    assert learning_rate(linear, 5) == pytest.approx(0.5)
    assert learning_rate(OptimizerSettings(lr=0.5), 1000) == 0.5
    with pytest.raises(ValueError, match="schedule"):
        OptimizerSettings(schedule="exp")
