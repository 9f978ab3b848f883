"""Save → load → one more step is bit-identical to never stopping (CPU, deterministic)."""

import pytest
import torch

from ppo.models.architecture import Architecture
from ppo.models.checkpoint import load_checkpoint, save_checkpoint
from ppo.models.convert import hf_to_megatron, load_megatron_state
from ppo.models.training import ModelUpdater
from ppo.models.value import build_value_model
from tests.models.conftest import make_hf_model
from tests.models.test_training import critic_batch, critic_loss, critic_settings


def fresh_critic(hf, arch):
    torch.manual_seed(0)
    critic = build_value_model(arch)
    load_megatron_state(critic, hf_to_megatron(hf.state_dict(), arch, value_head=True),
                        optional=("output_layer.weight",))
    return ModelUpdater(critic, critic_settings())


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


@pytest.mark.slow
@pytest.mark.parametrize("history", ["never_stepped", "reset_after_steps"])
def test_an_optimizer_without_state_saves_and_resumes(megatron_world, tmp_path, history):
    """A policy saved during critic warmup has an empty Adam state (never stepped, or reset after the warm start);
    its checkpoint must load, and the next step must equal that of the model that was never saved."""
    hf = make_hf_model("qwen2", tied=False, seed=22)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    batches = [critic_batch(arch.vocab_size, seed=s) for s in range(3)]
    step = lambda trainer, b: trainer.step([b], critic_loss(b, b["mask"].sum()))  # noqa: E731

    def prepared():
        trainer = fresh_critic(hf, arch)
        if history == "reset_after_steps":
            step(trainer, batches[0])
            trainer.reset_optimizer_state()
        return trainer

    straight = prepared()
    saved = prepared()
    save_checkpoint(saved, tmp_path / "ckpt")
    resumed = fresh_critic(hf, arch)
    load_checkpoint(resumed, tmp_path / "ckpt")
    for b in batches[1:]:
        step(straight, b)
        step(resumed, b)
    for (name, a), (_, b) in zip(straight.module.named_parameters(), resumed.module.named_parameters()):
        assert torch.equal(a, b), name


def test_partial_checkpoint_is_refused(megatron_world, tmp_path):
    (tmp_path / "ckpt.partial").mkdir()
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        load_checkpoint(None, tmp_path / "ckpt.partial")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(None, tmp_path / "missing")


@pytest.mark.slow
def test_checkpoint_resumes_across_a_change_of_tensor_parallel_size(megatron_world, tmp_path):
    """Saved at TP=1, resumed at TP=2 on two gloo processes: same values, same parameters after one more step."""
    from ppo.models.convert import save_hf_checkpoint
    from tests.models.test_tensor_parallel import run_tp2
    from tests.models.tp_worker import resume_and_step

    hf = make_hf_model("qwen2", tied=False, seed=31)
    arch = Architecture.from_hf_config(hf.config.to_dict())
    hf_dir = save_hf_checkpoint(hf.state_dict(), hf.config.to_dict(), tmp_path / "hf")
    trainer = fresh_critic(hf, arch)
    for seed in range(2):
        b = critic_batch(arch.vocab_size, seed=seed)
        trainer.step([b], critic_loss(b, b["mask"].sum()))
    save_checkpoint(trainer, tmp_path / "ckpt")

    tp1 = resume_and_step(str(tmp_path / "ckpt"), str(hf_dir), 1)
    tp2 = run_tp2(hf_dir, tmp_path / "tp2.pt", RESUME_FROM=str(tmp_path / "ckpt"))
    assert tp1["steps"] == tp2["steps"] == 3
    torch.testing.assert_close(tp2["values"], tp1["values"], rtol=0, atol=1e-5)
    assert tp2["params"].keys() == tp1["params"].keys()
    for name, expected in tp1["params"].items():
        error = (tp2["params"][name] - expected).abs().max().item()
        assert error <= 1e-5 * expected.abs().max().item() + 1e-7, (name, error)


@pytest.mark.slow
def test_a_first_save_starts_no_process(megatron_world, tmp_path):
    """A rank's first save starts no helper process (Megatron's writer would spawn a ``multiprocessing`` Manager for
    its results queue, seconds of a new interpreter): the results come back through a queue in this process."""
    import psutil
    from megatron.core.dist_checkpointing.strategies import filesystem_async

    hf = make_hf_model("qwen2", tied=False, seed=23)
    trainer = fresh_critic(hf, Architecture.from_hf_config(hf.config.to_dict()))
    filesystem_async._results_queue = None  # as in a process that has not saved yet
    before = {p.pid for p in psutil.Process().children()}
    save_checkpoint(trainer, tmp_path / "ckpt")
    assert {p.pid for p in psutil.Process().children()} == before
    resumed = fresh_critic(hf, Architecture.from_hf_config(hf.config.to_dict()))
    with torch.no_grad():
        resumed.module.output_layer.weight.add_(1.0)
    load_checkpoint(resumed, tmp_path / "ckpt")  # the metadata Megatron wrote from the results it got back
    assert torch.equal(resumed.module.output_layer.weight, trainer.module.output_layer.weight)
