"""Held-out validation on the engines: greedy accuracy, and with ``samples`` = K sampled answers per problem avg@K and
unbiased pass@k (``ppo.envs.pass_at_k``), plus one row per answer for ``<run_dir>/samples``.

One function serves validation inside the loop (``trainer.val_samples``) and ``launch.py eval`` on a checkpoint:
``generate(prompts, sampling, seed)`` is the engine pool's or a single engine's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ppo.algorithms.reduction import mean_by_group
from ppo.envs.answer import extract_answer
from ppo.envs.pass_at_k import grouped_pass_at_k
from ppo.rollout.settings import SamplingConfig


def pass_ks(samples: int) -> list[int]:
    """The k reported for K samples a problem: 1, 2, 4, ... up to K, and K itself."""
    ks, k = [], 1
    while k < samples:
        ks.append(k)
        k *= 2
    return [*ks, samples]


def validate(generate: Callable, env, records, prompts: list[list[int]], sampling: SamplingConfig, *,
             samples: int = 0, seed: int = 0, prefix: str = "validation/") -> tuple[dict[str, float], list[dict]]:
    """``(metrics, rows)`` for the held-out ``records`` (``prompts`` their token ids).

    Greedy: ``accuracy``, ``avg_length`` and ``accuracy/<group>`` per ``metadata["group"]``.  With ``samples`` = K
    > 0, K answers per problem at the rollouts' sampling settings: ``avg@K`` (the mean reward of all K·N answers,
    as DAPO reports AIME) and ``pass@k`` for k in :func:`pass_ks` (an answer passes with a reward of 0.5 or
    more).  ``rows``: one per answer (record id, mode, the problem as the source states it, the response, its
    extracted answer, the ground truth, the reward)."""
    greedy = SamplingConfig(n=1, temperature=0.0, max_new_tokens=sampling.max_new_tokens, stop=sampling.stop,
                            stop_token_ids=sampling.stop_token_ids, logprobs=False)
    truths = [r.ground_truth for r in records]
    answers = [group[0] for group in generate(prompts, greedy, None)]
    rewards, _ = env.score([a.text for a in answers], truths)
    lengths = [len(a.token_ids) for a in answers]
    metrics = {f"{prefix}accuracy": rewards.mean().item(), f"{prefix}avg_length": sum(lengths) / len(lengths)}
    for name, accuracy in mean_by_group(rewards.tolist(), [r.metadata.get("group") for r in records]).items():
        metrics[f"{prefix}accuracy/{name}"] = accuracy
    rows = answer_rows(records, [[a] for a in answers], rewards.tolist(), mode="greedy")
    if samples > 0:
        drawn = generate(prompts, replace(sampling, n=samples, logprobs=False), seed)
        texts = [s.text for group in drawn for s in group]
        ids = [i for i, group in enumerate(drawn) for _ in group]
        sampled, _ = env.score(texts, [truths[i] for i in ids])
        metrics[f"{prefix}avg@{samples}"] = sampled.mean().item()
        correct = [r >= 0.5 for r in sampled.tolist()]
        for k in pass_ks(samples):
            metrics[f"{prefix}pass@{k}"] = grouped_pass_at_k(correct, ids, k)
        rows += answer_rows(records, drawn, sampled.tolist(), mode="sampled")
    return metrics, rows


def answer_rows(records, groups: list[list], rewards: list[float], *, mode: str) -> list[dict]:
    """One row per answer, in problem order (``rewards`` flat, in the same order)."""
    flat = [(record, sample) for record, group in zip(records, groups) for sample in group]
    return [{"record_id": record.id, "mode": mode, "prompt": record.prompt, "response": sample.text,
             "answer": extract_answer(sample.text), "ground_truth": record.ground_truth, "reward": reward}
            for (record, sample), reward in zip(flat, rewards)]
