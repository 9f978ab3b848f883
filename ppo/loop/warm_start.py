"""The warm start: supervised steps on (prompt, answer) pairs of the training set that teach the answer format
before PPO, and the weights file the KL reference and the critic then start from."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ppo.atomic import write_bytes_atomic
from ppo.data.batch import Batch
from ppo.loop.settings import PPOSettings
from ppo.rollout.batch import build_rollout_batch
from ppo.rollout.settings import Sample
from ppo.workers.group import PolicyGroup

REFERENCE = "reference.safetensors"

WARM_START_CHUNK = 20
"""Warm-start steps the policy takes in one call: a round trip per step cost more than its arithmetic on a laptop
CPU, and a chunk still reports progress (and stays within ``trainer.start_timeout_s``) as it goes."""


def warm_start_batches(settings: PPOSettings, train_records: list, template, tokenizer) -> list[Batch]:
    """The warm start's ``trainer.warm_start_steps`` batches of ``warm_start_batch_size`` records drawn with
    replacement: each record drawn is encoded once, in two batched tokenizer calls (prompts, answers), where
    encoding every draw apart cost the driver ~20 ms a step (3 s of the default's set-up).

    They are drawn with ``trainer.warm_start_seed``, not the run's ``seed``: the warm start stands in for the
    checkpoint RL starts from, so runs that differ only in ``seed`` start from the same weights."""
    generator = torch.Generator().manual_seed(settings.warm_start_seed)
    draws = [torch.randint(len(train_records), (settings.warm_start_batch_size,), generator=generator).tolist()
             for _ in range(settings.warm_start_steps)]
    drawn = sorted({j for picks in draws for j in picks})
    records = [train_records[j] for j in drawn]
    prompts = dict(zip(drawn, template.encode_many(records, tokenizer)))
    answers = tokenizer([r.ground_truth for r in records], add_special_tokens=False)["input_ids"]
    answers = {j: [*ids, tokenizer.eos_token_id] for j, ids in zip(drawn, answers)}
    return [build_rollout_batch([prompts[j] for j in picks],
                                [[Sample(answers[j], [0.0] * len(answers[j]), "stop")] for j in picks],
                                pad_id=tokenizer.pad_token_id,
                                ground_truths=[train_records[j].ground_truth for j in picks])
            for picks in draws]


def warm_start(policy: PolicyGroup, batches: list[Batch], lr: float) -> dict[str, float]:
    """A supervised step on each of ``batches``, :data:`WARM_START_CHUNK` a call, then a fresh optimizer state for
    RL.  Returns ``warm_start/final_nll`` and ``timing/setup/warm_start`` (logged with step 0)."""
    started = time.perf_counter()
    metrics = {}
    for first in range(0, len(batches), WARM_START_CHUNK):
        chunk = policy.supervised_steps(batches[first:first + WARM_START_CHUNK], lr=lr)
        for i, metrics in enumerate(chunk, start=first):
            if i % 20 == 0 or i == len(batches) - 1:
                print(f"[ppo] warm start {i + 1}/{len(batches)}: nll {metrics['loss']:.3f}", flush=True)
    policy.reset_optimizer_state()
    seconds = time.perf_counter() - started
    print(f"[ppo] warm start done in {seconds:.1f} s", flush=True)
    return {"warm_start/final_nll": float(metrics["loss"]), "timing/setup/warm_start": seconds}


def warm_start_cached(exp, policy: PolicyGroup, batches: list[Batch], model_path: Path, run_dir: Path, *,
                      plan, threads: int) -> dict[str, float]:
    """:func:`warm_start`, or its result from an earlier run's (:mod:`ppo.loop.warm_start_cache`): the same weights,
    loaded into the policy and written as the run's ``reference.safetensors``, and the same report (the timing is
    this run's).  A warm start that runs is stored for the next run."""
    from ppo.loop import warm_start_cache as cache

    root = cache.cache_root()
    if root is None or not cache.cacheable(exp, plan):
        return warm_start(policy, batches, exp.trainer.warm_start_lr)
    started = time.perf_counter()
    inputs = cache.warm_start_inputs(exp, model_path, batches, threads)
    key = cache.warm_start_key(inputs)
    path = Path(run_dir) / REFERENCE
    found = cache.lookup(root, key)
    if found is not None:
        weights, report = found
        write_bytes_atomic(path, weights.read_bytes())
        policy.load_weights(str(path))
        seconds = time.perf_counter() - started
        print(f"[ppo] warm start from the cache ({root / key}) in {seconds:.1f} s", flush=True)
        return {**report, "timing/setup/warm_start": seconds}
    report = warm_start(policy, batches, exp.trainer.warm_start_lr)
    try:
        cache.store(root, key, warm_started_weights(policy, run_dir),
                    {k: v for k, v in report.items() if not k.startswith("timing/")}, inputs)
    except OSError as err:  # a cache that cannot be written costs the next run its warm start, not this run
        print(f"[ppo] the warm start was not cached in {root}: {err}", flush=True)
    report["timing/setup/warm_start"] = time.perf_counter() - started
    return report


def warm_started_weights(policy: PolicyGroup, run_dir: Path) -> Path:
    """``reference.safetensors``: the warm-started policy in HF names, written once by policy rank 0 (the only
    rank that gathers the whole model); the reference and the critic's ranks read their shards from it.  It stays
    in the run directory so that a resumed run measures KL to the same model."""
    path = Path(run_dir) / REFERENCE
    if not path.is_file():
        policy.write_weights(str(path))
    return path
