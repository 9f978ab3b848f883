"""A critic started from an earlier run's checkpoint step holds that critic's weights, with a fresh optimizer; its
HF export carries the value head as ``score.weight`` (the end-to-end run is in tests/trainer/test_feature_matrix.py).
"""

from __future__ import annotations

import os

import pytest
import torch

from ppo.cluster.ports import free_port


@pytest.fixture
def model_dir(tmp_path):
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    saved = dict(os.environ)
    yield str(create_tiny_model(tmp_path / "model", build_arithmetic_tokenizer(), num_layers=2))
    os.environ.clear()
    os.environ.update(saved)


def batch():
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample

    g = torch.Generator().manual_seed(0)
    prompts = [[3 + i, 4, 5] for i in range(4)]
    samples = [[Sample(list(range(3, 3 + n)), [-1.0] * n, "stop")] for n in (2, 4, 3, 1)]
    out = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * 4)
    out.values = torch.zeros(out.response_mask.shape)
    out.returns = torch.randn(out.response_mask.shape, generator=g) * out.response_mask
    return out


@pytest.mark.slow
def test_a_critic_starts_from_a_checkpoint_step_with_a_fresh_optimizer(model_dir, tmp_path):
    from ppo.workers.specs import MegatronCritic
    from ppo.workers.value import ValueWorker

    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", seed=0)
    trained = ValueWorker(MegatronCritic(), model_dir, master_port=free_port(), **common)
    data = batch()
    for seed in range(3):
        trained.train(data, num_minibatches=1, seed=seed)
    trained.save(str(tmp_path / "critic"))
    fresh = ValueWorker(MegatronCritic(), model_dir, master_port=free_port(), **common)
    started = ValueWorker(MegatronCritic(), model_dir, init_checkpoint=str(tmp_path / "critic"),
                          master_port=free_port(), **common)
    assert torch.equal(started.values(data), trained.values(data))
    assert not torch.equal(fresh.values(data), trained.values(data))
    assert started.updater.steps_done == 0, "the optimizer starts fresh"
    assert "score.weight" in started.export()


def test_a_critic_of_fewer_layers_is_the_backbones_first_layers_under_its_head(model_dir, tmp_path):
    """``critic.num_layers=1`` on a 2-layer model: transformers' 1-layer model holding the first layer's weights, with
    the worker's head on its last hidden state, gives the same values; the export says 1 layer and loads back."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModel

    from ppo.models.export import write_hf_export
    from ppo.workers.specs import MegatronCritic
    from ppo.workers.value import ValueWorker

    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", seed=0)
    critic = ValueWorker(MegatronCritic(num_layers=1), model_dir, master_port=free_port(), **common)
    data = batch()
    values = critic.values(data)

    config = AutoConfig.from_pretrained(model_dir, num_hidden_layers=1)
    reference = AutoModel.from_config(config, torch_dtype=torch.float32).eval()
    weights = {k.removeprefix("model."): v for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    missing, unexpected = reference.load_state_dict(weights, strict=False)
    assert not missing and unexpected and all(k.startswith("layers.1.") for k in unexpected), (missing, unexpected)
    head = critic.export()["score.weight"]
    for row, (ids, segments) in enumerate(zip(data.input_ids, data.segment_ids)):
        n = int(segments.sum())
        with torch.no_grad():
            hidden = reference(input_ids=ids[:n].unsqueeze(0)).last_hidden_state[0]
        # values[t] = V(the prefix before token t): the head on the hidden state at t - 1, 0 at the first token
        expected = torch.cat([torch.zeros(1), hidden[:-1] @ head[0]])
        torch.testing.assert_close(values[row, :n], expected, rtol=1e-4, atol=1e-5)

    exported = write_hf_export(critic.export(), model_dir, tmp_path / "critic")
    assert AutoConfig.from_pretrained(exported).num_hidden_layers == 1
    reloaded = ValueWorker(MegatronCritic(model_path=str(exported)), str(exported), master_port=free_port(), **common)
    assert torch.equal(reloaded.values(data), values)
    with pytest.raises(ValueError, match=r"^critic.num_layers=3 must be in \[1, 2\] \(the layers of the backbone"):
        ValueWorker(MegatronCritic(num_layers=3), model_dir, master_port=free_port(), **common)


@pytest.mark.slow
def test_a_critic_built_after_its_process_started_is_the_critic_built_at_once(model_dir):
    """The trainer starts the critic's ranks during the warm start and builds the model once the weights are written
    (``ValueWorker(spec, None)``, then ``build``): its randomly initialised value head and its first update are the
    same to the bit as a critic built in its constructor."""
    from ppo.workers.specs import MegatronCritic
    from ppo.workers.value import ValueWorker

    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", seed=0)
    at_once = ValueWorker(MegatronCritic(), model_dir, master_port=free_port(), **common)
    later = ValueWorker(MegatronCritic(), None, master_port=free_port(), **common)
    assert later.updater is None, "no model before build"
    later.build(model_dir)
    data = batch()
    assert torch.equal(later.values(data), at_once.values(data))
    assert later.train(data, num_minibatches=1, seed=0) == at_once.train(data, num_minibatches=1, seed=0)
    assert torch.equal(later.values(data), at_once.values(data))
