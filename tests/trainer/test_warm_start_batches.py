"""The warm start's batches, built from each drawn record encoded once, are the batches of encoding every draw on its
own (what the warm start did before): the same tokens, masks and answers, step by step, so the warm-started weights
are the same to the bit."""

import fiddle as fdl
import torch

from experiments import tiny_cpu
from ppo.data.tokenizer import build_arithmetic_tokenizer
from ppo.loop.warm_start import warm_start_batches
from ppo.rollout.batch import build_rollout_batch
from ppo.rollout.settings import Sample


def per_draw_batches(cfg, train_records, template, tokenizer) -> list:
    """The reference: every step's draws encoded apart, one tokenizer call per answer."""
    generator = torch.Generator().manual_seed(cfg.warm_start_seed)
    batches = []
    for _ in range(cfg.warm_start_steps):
        picks = torch.randint(len(train_records), (cfg.warm_start_batch_size,), generator=generator)
        records = [train_records[j] for j in picks.tolist()]
        prompts = template.encode_many(records, tokenizer)
        answers = [tokenizer(r.ground_truth, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                   for r in records]
        batches.append(build_rollout_batch(prompts, [[Sample(a, [0.0] * len(a), "stop")] for a in answers],
                                           pad_id=tokenizer.pad_token_id,
                                           ground_truths=[r.ground_truth for r in records]))
    return batches


def test_warm_start_batches_are_those_of_encoding_each_draw():
    cfg = tiny_cpu.config()
    cfg.task.train_size = 300  # records drawn several times over
    cfg.trainer.warm_start_steps, cfg.trainer.warm_start_batch_size = 6, 64
    exp = fdl.build(cfg)
    inputs = (exp.trainer, exp.task.train_records(), exp.task.template(), build_arithmetic_tokenizer())
    ours, reference = warm_start_batches(*inputs), per_draw_batches(*inputs)
    assert len(ours) == len(reference) == 6
    for mine, theirs in zip(ours, reference):
        assert mine.fields().keys() == theirs.fields().keys()
        for key, value in theirs.fields().items():
            assert torch.equal(mine.get(key), value) if torch.is_tensor(value) else mine.get(key) == value, key
