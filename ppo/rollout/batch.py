"""The batch structure every phase of a PPO step passes along: a dict of ``[B, T]`` tensors plus per-sample fields.

Rows are ``prompt + response`` (right-padded).  Token-aligned fields, all ``[B, T]``:

- ``input_ids``; ``segment_ids`` (1 on real tokens, 0 on padding; packing uses 1, 2, …)
- ``response_mask``: 1 on trainable tokens — the sampled response; prompt, padding and environment turns are 0
- ``logp_gen``: the inference engine's logprob of each sampled token (0 elsewhere)

Per-sample ``[B]`` tensors: ``prompt_lengths``, ``response_lengths``, ``truncated`` (hit max_new_tokens),
``group_ids`` (which prompt; the samples of one prompt form a group).  Lists: ``ground_truths``, ``responses``
(decoded text), ``record_ids``.  Later phases add ``rewards`` [B], ``values``, ``logp_old``, ``logp_ref``,
``advantages``, ``returns`` ([B, T]).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

TOKEN_FIELDS = ("input_ids", "segment_ids", "response_mask", "logp_gen")


def build_rollout_batch(
    prompts: Sequence[Sequence[int]],
    samples,
    *,
    pad_id: int,
    ground_truths: Sequence[str],
    record_ids: Sequence[str] | None = None,
    group_offset: int = 0,
) -> dict:
    """Flatten ``samples[i][j]`` (sample j of prompt i, ``ppo.rollout.settings.Sample``) into one batch."""
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
    return {
        "input_ids": torch.tensor([pad(r, pad_id) for r in rows], dtype=torch.long),
        "segment_ids": torch.tensor([pad([1] * len(r), 0) for r in rows], dtype=torch.long),
        "response_mask": torch.tensor([pad(m, 0.0) for m in masks]),
        "logp_gen": torch.tensor([pad(lp, 0.0) for lp in logps]),
        "prompt_lengths": torch.tensor([m[1] for m in meta]),
        "response_lengths": torch.tensor([m[2] for m in meta]),
        "truncated": torch.tensor([m[3] for m in meta]),
        "group_ids": torch.tensor(index) + group_offset,
        "responses": [m[4] for m in meta],
        "ground_truths": [ground_truths[i] for i in index],
        "record_ids": [record_ids[i] for i in index] if record_ids is not None else [str(i) for i in index],
    }


def select(batch: dict, index: torch.Tensor | Sequence[int]) -> dict:
    """The rows ``index`` of every field (tensors and lists alike)."""
    index = torch.as_tensor(index, dtype=torch.long)
    out = {}
    for key, value in batch.items():
        if torch.is_tensor(value) and value.dim() > 0:
            out[key] = value[index]
        elif isinstance(value, list):
            out[key] = [value[i] for i in index.tolist()]
        else:
            out[key] = value
    return out


def concat(batches: Sequence[dict]) -> dict:
    """Stack batches row-wise, padding token fields to the widest (padding: 0, segment 0)."""
    width = max(b["input_ids"].shape[1] for b in batches)
    out = {}
    for key in batches[0]:
        values = [b[key] for b in batches]
        if torch.is_tensor(values[0]) and values[0].dim() == 2:
            values = [torch.nn.functional.pad(v, (0, width - v.shape[1])) for v in values]
            out[key] = torch.cat(values)
        elif torch.is_tensor(values[0]):
            out[key] = torch.cat(values)
        else:
            out[key] = [x for v in values for x in v]
    return out


def trim(batch: dict) -> dict:
    """Drop trailing all-padding columns (after selecting rows, the widest row may be shorter)."""
    width = int(batch["segment_ids"].ne(0).sum(-1).max())
    return {k: (v[:, :width] if torch.is_tensor(v) and v.dim() == 2 else v) for k, v in batch.items()}


def pad_width(batch: dict, multiple: int, *, pad_id: int = 0) -> dict:
    """The batch with every ``[B, T]`` field right-padded to the next multiple of ``multiple`` columns.

    Why: Megatron's sequence parallelism splits each micro-batch's sequence over the tensor-parallel ranks (after
    the embedding, around the norms and dropout), so it asserts that ``T`` divides by TP; :func:`trim` cuts a
    micro-batch to its longest row, an arbitrary width.  verl pads each micro-batch the same way, to a multiple of
    ``TP × CP`` (with context parallelism and its load-balanced split into ``2·CP`` chunks it would be
    ``2·TP·CP``; the workers refuse context parallelism, see :class:`ppo.models.parallel.ParallelConfig`).

    The new columns are padding: ``segment_ids`` 0, so attention masks them and they score nothing, ``input_ids``
    ``pad_id``, and 0 in every other 2-D field (``response_mask``, ``logp_*``, ``values``, ``advantages``, …), so
    losses and counts over masks are unchanged.  Per-sample fields and lists are left as they are.  A no-op when
    ``T`` already divides by ``multiple`` (and for ``multiple == 1``).
    """
    if multiple < 1:
        raise ValueError(f"pad_width: multiple must be >= 1, got {multiple}")
    width = batch["segment_ids"].shape[1]
    extra = -width % multiple
    if extra == 0:
        return batch
    out = {}
    for key, value in batch.items():
        if torch.is_tensor(value) and value.dim() == 2:
            if value.shape[1] != width:
                raise ValueError(f"pad_width: field {key!r} has {value.shape[1]} columns, segment_ids {width}")
            value = torch.nn.functional.pad(value, (0, extra), value=pad_id if key == "input_ids" else 0)
        out[key] = value
    return out


def to_device(batch: dict, device: torch.device) -> dict:
    """The batch with its tensors on ``device`` (the worker's GPU; a no-op on CPU); other fields as they are."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
