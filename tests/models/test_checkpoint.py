"""Save → load → one more step is bit-identical to never stopping (CPU, deterministic)."""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.checkpoint import load_checkpoint, save_checkpoint
from ppo.models.convert import hf_to_megatron, load_megatron_state
from ppo.models.training import ModelTrainer, OptimizerSettings
from ppo.models.value import build_value_model
from tests.models.conftest import make_hf_model
from tests.models.test_training import critic_batch, critic_loss


def fresh_critic(hf, arch):
    torch.manual_seed(0)
    critic = build_value_model(arch)
    load_megatron_state(critic, hf_to_megatron(hf.state_dict(), arch, value_head=True), optional=("output_layer.weight",))
    return ModelTrainer(critic, OptimizerSettings(lr=1e-3, warmup_steps=3, schedule="cosine", decay_steps=10))


@pytest.mark.slow
def test_resume_is_bit_identical(megatron_world, tmp_path):
    hf = make_hf_model("qwen2", tied=False, seed=21)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    batches = [critic_batch(arch.vocab_size, seed=s) for s in range(4)]
    step = lambda trainer, b: trainer.step([b], critic_loss(b, b["mask"].sum()))  # noqa: E731

    straight = fresh_critic(hf, arch)
    for b in batches:
        step(straight, b)

    first = fresh_critic(hf, arch)
    for b in batches[:2]:
        step(first, b)
    save_checkpoint(first, tmp_path / "ckpt")
    assert not (tmp_path / "ckpt.partial").exists()
    step(first, batches[2])  # moves on after the save; the checkpoint must not follow

    resumed = fresh_critic(hf, arch)
    with torch.no_grad():
        resumed.module.output_layer.weight.add_(1.0)  # a different head, so loading it must overwrite it
    load_checkpoint(resumed, tmp_path / "ckpt")
    assert resumed.steps_done == 2
    for b in batches[2:]:
        step(resumed, b)
    for (name, a), (_, b) in zip(straight.module.named_parameters(), resumed.module.named_parameters()):
        assert torch.equal(a, b), name


def test_partial_checkpoint_is_refused(megatron_world, tmp_path):
    (tmp_path / "ckpt.partial").mkdir()
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        load_checkpoint(None, tmp_path / "ckpt.partial")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(None, tmp_path / "missing")
