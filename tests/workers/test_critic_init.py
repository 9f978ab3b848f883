"""A critic started from an earlier run's checkpoint step holds that critic's weights, with a fresh optimizer; its
HF export carries the value head as ``score.weight`` (the end-to-end run is in tests/trainer/test_feature_matrix.py).
"""

from __future__ import annotations

import os

import pytest
import torch

from ppo.workers.ports import free_port


@pytest.fixture
def model_dir(tmp_path):
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    saved = dict(os.environ)
    yield str(create_tiny_model(tmp_path / "model", build_arithmetic_tokenizer(), num_layers=2))
    os.environ.clear()
    os.environ.update(saved)


def batch() -> dict:
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.engine import Sample

    g = torch.Generator().manual_seed(0)
    prompts = [[3 + i, 4, 5] for i in range(4)]
    samples = [[Sample(list(range(3, 3 + n)), [-1.0] * n, "stop")] for n in (2, 4, 3, 1)]
    out = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * 4)
    out["values"] = torch.zeros(out["response_mask"].shape)
    out["returns"] = torch.randn(out["response_mask"].shape, generator=g) * out["response_mask"]
    return out


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
    assert started.trainer.steps_done == 0, "the optimizer starts fresh"
    assert "score.weight" in started.export()
