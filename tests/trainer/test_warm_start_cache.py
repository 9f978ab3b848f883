"""The warm-start cache's key and entries (:mod:`ppo.loop.warm_start_cache`); that a run from the cache trains to the
bit as the run that filled it is checked in a real run (``test_feature_matrix``'s seed test)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import fiddle as fdl
import pytest

from experiments import tiny_cpu
from ppo.data.tokenizer import build_arithmetic_tokenizer
from ppo.loop import warm_start_cache as cache
from ppo.loop.warm_start import warm_start_batches


def test_where_the_cache_lives():
    assert cache.cache_root({"HOME": "/h"}) == Path.home() / ".cache/ppo/warm_start"
    assert cache.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/ppo/warm_start")
    assert cache.cache_root({"XDG_CACHE_HOME": "/x", "PPO_WARM_START_CACHE": "/elsewhere"}) == Path("/elsewhere")
    assert cache.cache_root({"PPO_WARM_START_CACHE": "off"}) is None


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """What the default's warm start depends on (6 steps of 16), with its initial model's folder."""
    cfg = tiny_cpu.config()
    cfg.trainer.warm_start_steps, cfg.trainer.warm_start_batch_size = 6, 16
    exp = fdl.build(cfg)
    model_path = exp.model.materialize(tmp_path_factory.mktemp("run"), exp.task)
    batches = warm_start_batches(exp.trainer, exp.task.train_records(), exp.task.template(),
                                 build_arithmetic_tokenizer())
    return exp, model_path, batches


def test_the_key_moves_with_every_input_of_the_warm_start(inputs, tmp_path):
    exp, model_path, batches = inputs
    key = cache.warm_start_key(cache.warm_start_inputs(exp, model_path, batches, threads=2))
    assert key == cache.warm_start_key(cache.warm_start_inputs(exp, model_path, batches, threads=2))

    def key_of(exp=exp, model_path=model_path, batches=batches, threads=2):
        return cache.warm_start_key(cache.warm_start_inputs(exp, model_path, batches, threads=threads))

    trainer = exp.trainer
    changed = {
        "lr": key_of(exp=dataclasses.replace(exp, trainer=dataclasses.replace(trainer, warm_start_lr=2e-3))),
        "seed": key_of(exp=dataclasses.replace(exp, seed=1)),
        "optimizer": key_of(exp=dataclasses.replace(exp, policy=dataclasses.replace(
            exp.policy, optimizer=dataclasses.replace(exp.policy.optimizer, adam_beta2=0.99)))),
        "micro-batching": key_of(exp=dataclasses.replace(exp, policy=dataclasses.replace(
            exp.policy, micro_batch_tokens=64))),
        "threads": key_of(exp=dataclasses.replace(exp, policy=dataclasses.replace(exp.policy, num_threads=1))),
        "the placement's threads": key_of(exp=dataclasses.replace(exp, policy=dataclasses.replace(
            exp.policy, num_threads=None)), threads=1),
        "fewer steps": key_of(batches=batches[:-1]),
    }
    first = batches[0]  # the same batches with one token changed (then put back)
    saved = first.input_ids[0, 0].item()
    first.input_ids[0, 0] = saved + 1
    try:
        changed["a token"] = key_of()
    finally:
        first.input_ids[0, 0] = saved
    copy = tmp_path / "model"
    copy.mkdir()
    for f in model_path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert key_of(model_path=copy) == key  # the files, not where they are
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[-1] ^= 1
    (copy / "model.safetensors").write_bytes(bytes(weights))
    changed["a weight's bit"] = key_of(model_path=copy)
    assert all(k != key for k in changed.values()), [name for name, k in changed.items() if k == key]
    assert len(set(changed.values())) == len(changed)


def test_an_entry_is_read_only_once_whole(tmp_path):
    root = tmp_path / "cache"
    weights = tmp_path / "reference.safetensors"
    weights.write_bytes(b"weights")
    assert cache.lookup(root, "k") is None
    with pytest.raises(OSError):  # a store that fails part way (the weights to copy are not there) leaves nothing
        cache.store(root, "k", tmp_path / "missing.safetensors", {"warm_start/final_nll": 1.5}, {})
    assert list(root.iterdir()) == []
    # a torn folder where an entry would be (from a tool that wrote in place) is not an entry
    (root / "k").mkdir()
    (root / "k" / cache.WEIGHTS).write_bytes(b"half")
    assert cache.lookup(root, "k") is None
    (root / "k" / cache.WEIGHTS).unlink()
    (root / "k" / cache.REPORT).write_text('{"warm_start/final_nll": 1.')
    assert cache.lookup(root, "k") is None
    (root / "k" / cache.REPORT).unlink()
    (root / "k").rmdir()
    cache.store(root, "k", weights, {"warm_start/final_nll": 1.5}, {"lr": 0.001})
    found_weights, report = cache.lookup(root, "k")
    assert found_weights.read_bytes() == b"weights" and report == {"warm_start/final_nll": 1.5}
    assert json.loads((root / "k" / "inputs.json").read_text()) == {"lr": 0.001}
    # a second run storing the same key keeps the first's entry, and leaves no staging folder behind
    weights.write_bytes(b"other")
    cache.store(root, "k", weights, {"warm_start/final_nll": 2.0}, {})
    assert cache.lookup(root, "k")[0].read_bytes() == b"weights"
    assert [p.name for p in root.iterdir()] == ["k"]
