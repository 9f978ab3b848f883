"""One step's batch from the engines: prompts from the loader, ``generations_per_prompt`` samples each, scored by the
math environment, rewards shaped, and with dynamic sampling regenerated until enough prompt groups have a spread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from ppo.algorithms.rewards import shape_rewards
from ppo.algorithms.sampling import dynamic_sampling_mask
from ppo.data.batch import Batch, concat, select
from ppo.rollout.batch import build_rollout_batch
from ppo.seeds import derive_seed


class CollectionStopped(RuntimeError):
    """Dynamic sampling could not fill a batch and the run asked to stop (``trainer.short_batch="fail"``)."""


class Collector:
    """Collects the batches of a run.

    ``settings`` is the run's ``PPOSettings`` (prompts and samples a step, dynamic sampling), ``timed_part(name)`` a
    context manager the trainer times the engines' and the scoring's share of a step with."""

    def __init__(self, *, engines, env, loader, template, tokenizer, settings, sampling, reward_shaping, seed: int,
                 timed_part: Callable):
        self.engines, self.env, self.loader = engines, env, loader
        self.template, self.tokenizer = template, tokenizer
        self.settings, self.sampling, self.reward_shaping = settings, sampling, reward_shaping
        self.seed = seed
        self.timed_part = timed_part

    def rollout(self, records, *, seed: int, group_offset: int = 0, policy_version: int | None = None
                ) -> tuple[Batch, dict]:
        """Generate ``generations_per_prompt`` samples per record and score them; returns the batch and env metrics.

        Group ids start at ``group_offset``, so that the batches of several attempts can be concatenated;
        ``policy_version``: the step whose weights the engines hold."""
        prompts = self.template.encode_many(records, self.tokenizer)
        with self.timed_part("generation/engines"):
            samples = self.engines.generate(prompts, replace(self.sampling, n=self.settings.generations_per_prompt),
                                            seed)
        batch = build_rollout_batch(prompts, samples, pad_id=self.tokenizer.pad_token_id,
                                    ground_truths=[r.ground_truth for r in records],
                                    record_ids=[r.id for r in records], group_offset=group_offset,
                                    policy_version=policy_version)
        with self.timed_part("generation/scoring"):
            batch.scores, env_metrics = self.env.score(batch.responses, batch.ground_truths,
                                                       finished=(~batch.truncated).tolist(),
                                                       group_ids=batch.group_ids.tolist(),
                                                       response_lengths=batch.response_lengths.tolist())
        batch.rewards, credit = shape_rewards(batch, self.reward_shaping, max_new_tokens=self.sampling.max_new_tokens)
        if credit is not None:
            batch.char_credit = credit
        return batch, env_metrics

    def collect(self, step: int, *, policy_version: int | None = None) -> tuple[Batch, dict]:
        """Step ``step``'s batch and its environment metrics; ``policy_version``: the step whose weights the engines
        hold (``step`` on-policy; the step before when the batch is collected ahead, ``ppo.loop.off_policy``).

        ``train/reward`` and the env metrics describe every sample generated (before dynamic sampling's filter), so
        they stay comparable with a run without it.  A batch still short after ``max_gen_batches`` trains on what was
        kept and logs ``dynamic_sampling/short_batch`` = 1, or stops the run (``trainer.short_batch="fail"``)."""
        cfg = self.settings
        target = cfg.prompts_per_step * cfg.generations_per_prompt
        kept, scores, attempts = [], [], []
        for attempt in range(cfg.max_gen_batches if cfg.dynamic_sampling else 1):
            batch, env_metrics = self.rollout(self.loader.next_batch(),
                                              seed=derive_seed(self.seed, "sampling", step, attempt),
                                              group_offset=attempt * cfg.prompts_per_step,
                                              policy_version=step if policy_version is None else policy_version)
            attempts.append(env_metrics)
            scores.append(batch.scores)
            if cfg.dynamic_sampling:
                batch = select(batch, torch.nonzero(dynamic_sampling_mask(batch.rewards, batch.group_ids))[:, 0])
            if batch.rows:
                kept.append(batch)
            if sum(b.rows for b in kept) >= target:
                break
        batch = self.fill(kept, target)
        if self.reward_shaping.overlong_filter:
            batch.response_mask = batch.response_mask * (~batch.truncated)[:, None]
        metrics = {key: sum(a[key] for a in attempts) / len(attempts) for key in attempts[0]}
        metrics["reward_all_attempts"] = torch.cat(scores).mean().item()
        if cfg.dynamic_sampling:
            metrics["dynamic_sampling/gen_batches"] = float(len(attempts))
            metrics["dynamic_sampling/kept_samples"] = float(batch.rows)
            metrics["dynamic_sampling/short_batch"] = float(batch.rows < target)
        return batch, metrics

    def fill(self, kept: list[Batch], target: int) -> Batch:
        """The first ``target`` samples of the attempts' kept samples (fewer when short, unless that must stop)."""
        cfg = self.settings
        if not kept:
            raise CollectionStopped("dynamic sampling kept no prompt group in max_gen_batches attempts "
                                    "(every group's rewards were all equal)")
        batch = concat(kept)
        batch = select(batch, torch.arange(min(target, batch.rows)))
        if batch.rows < target and cfg.short_batch == "fail":
            raise CollectionStopped(f"dynamic sampling kept {batch.rows} of {target} samples after "
                                    f"max_gen_batches={cfg.max_gen_batches} attempts (trainer.short_batch='fail')")
        return batch
