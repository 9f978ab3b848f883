"""The rollout's batch: what the engines generated for a step's prompts, one row per sample
(:class:`ppo.data.batch.Batch` declares the fields)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ppo.data.batch import Batch


def build_rollout_batch(
    prompts: Sequence[Sequence[int]],
    samples,
    *,
    pad_id: int,
    ground_truths: Sequence[str],
    record_ids: Sequence[str] | None = None,
    group_offset: int = 0,
    policy_version: int | None = None,
) -> Batch:
    """Flatten ``samples[i][j]`` (sample j of prompt i, ``ppo.rollout.settings.Sample``) into one batch.

    ``policy_version``: the version of the policy whose weights generated the samples (the step); None for rows no
    policy generated (the warm start's reference answers), which then leave the field unset."""
    rows, masks, logps, meta = [], [], [], []
    for i, (prompt, group) in enumerate(zip(prompts, samples)):
        for sample in group:
            rows.append(list(prompt) + list(sample.token_ids))
            masks.append([0.0] * len(prompt) + [1.0] * len(sample.token_ids))
            logps.append([0.0] * len(prompt) + list(sample.logprobs))
            meta.append((i, len(prompt), len(sample.token_ids), sample.truncated, sample.text))
    width = max(map(len, rows))
    pad = lambda row, value: list(row) + [value] * (width - len(row))  # noqa: E731
    index = [m[0] for m in meta]
    batch = Batch(
        input_ids=torch.tensor([pad(r, pad_id) for r in rows], dtype=torch.long),
        segment_ids=torch.tensor([pad([1] * len(r), 0) for r in rows], dtype=torch.long),
        response_mask=torch.tensor([pad(m, 0.0) for m in masks]),
        logp_gen=torch.tensor([pad(lp, 0.0) for lp in logps]),
        prompt_lengths=torch.tensor([m[1] for m in meta], dtype=torch.long),
        response_lengths=torch.tensor([m[2] for m in meta], dtype=torch.long),
        truncated=torch.tensor([m[3] for m in meta], dtype=torch.bool),
        group_ids=torch.tensor(index, dtype=torch.long) + group_offset,
        responses=[m[4] for m in meta],
        ground_truths=[ground_truths[i] for i in index],
        record_ids=[record_ids[i] for i in index] if record_ids is not None else [str(i) for i in index],
    )
    if policy_version is not None:
        batch.policy_version = torch.full((len(rows),), policy_version, dtype=torch.long)
    return batch
