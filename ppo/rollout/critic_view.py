"""The critic's view of a rollout batch when it reads each sample's reference answer first (an asymmetric critic).

``critic.reference_answer=True``: the critic's row is ``reference answer + <eos> + prompt + response``, so that its
value before each response token can say whether the answer so far still agrees with the reference, instead of
redoing the task to guess.  The policy never sees the reference; the critic exists only in training, where the
verifier holds the reference anyway (asymmetric actor-critic: the critic may read what the actor cannot).

Both functions are pure: ``with_prefixes`` shifts every token-aligned field of a row right by its prefix's length
(the prefix positions carry no mask, no value, no return), and ``without_prefixes`` takes the critic's ``[B, T + K]``
output back to the batch's ``[B, T]`` columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ppo.data.batch import Batch

CRITIC_FIELDS = ("input_ids", "segment_ids", "response_mask", "values", "returns")


def with_prefixes(batch: Batch, prefixes: Sequence[Sequence[int]]) -> Batch:
    """The critic's fields of ``batch`` with ``prefixes[i]`` (token ids) before row i, and ``prefix_lengths``; the
    prefix joins the row's first segment.  Fields unset in ``batch`` stay unset."""
    B, T = batch.rows, batch.width
    if len(prefixes) != B:
        raise ValueError(f"{len(prefixes)} prefixes for {B} rows")
    lengths = torch.tensor([len(p) for p in prefixes], dtype=torch.long)
    width = T + int(lengths.max()) if B else T
    columns = lengths[:, None] + torch.arange(T)[None, :]  # where column t of row i lands
    shifted = {}
    for key in CRITIC_FIELDS:
        if not batch.has(key):
            continue
        field = batch.get(key)
        shifted[key] = torch.zeros(B, width, dtype=field.dtype).scatter_(1, columns, field)
    for i, prefix in enumerate(prefixes):
        shifted["input_ids"][i, : len(prefix)] = torch.as_tensor(prefix, dtype=torch.long)
        shifted["segment_ids"][i, : len(prefix)] = batch.segment_ids[i, 0]
    return Batch(**shifted, prefix_lengths=lengths)


def without_prefixes(values: torch.Tensor, prefix_lengths: torch.Tensor, width: int) -> torch.Tensor:
    """Columns ``prefix_lengths[i] .. + width`` of each row of ``values`` (the critic's output on ``with_prefixes``):
    the values on the batch's own ``[B, width]`` columns."""
    columns = prefix_lengths[:, None].to(torch.long) + torch.arange(width)[None, :]
    return values.gather(1, columns)
