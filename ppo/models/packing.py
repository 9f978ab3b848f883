"""Sequence packing and dynamic micro-batches by token budget.

Packing puts several variable-length sequences in one row, told apart by ``segment_ids`` (1, 2, … per row, 0 on
padding); ``ppo.models.forward`` turns those into a block-diagonal causal mask and restarting positions, so a packed
row computes what the separate padded rows compute.  (On CPU the mask is dense ``[T, T]``; Megatron's THD
packed-sequence path needs Transformer Engine on GPUs.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # [R, L]
    segment_ids: torch.Tensor  # [R, L]
    index: list[list[tuple[int, int, int]]]  # per row: (sample, start, length)

    def unpack(self, packed: torch.Tensor, lengths: list[int], pad_to: int) -> torch.Tensor:
        """Per-token values ``[R, L]`` of the packed rows back into the padded ``[B, pad_to]`` layout."""
        out = packed.new_zeros(len(lengths), pad_to)
        for row, entries in enumerate(self.index):
            for sample, start, length in entries:
                out[sample, :length] = packed[row, start : start + length]
        return out


def pack_sequences(sequences: list[torch.Tensor], row_length: int, pad_id: int = 0) -> PackedBatch:
    """First-fit-decreasing packing of 1-D token sequences into rows of ``row_length`` tokens."""
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    rows: list[list[int]] = []
    used: list[int] = []
    for i in order:
        n = len(sequences[i])
        if n > row_length:
            raise ValueError(f"sequence {i} has {n} tokens, more than the packing row length {row_length}")
        slot = next((r for r, u in enumerate(used) if u + n <= row_length), None)
        if slot is None:
            rows.append([])
            used.append(0)
            slot = len(rows) - 1
        rows[slot].append(i)
        used[slot] += n
    input_ids = torch.full((len(rows), row_length), pad_id, dtype=torch.long)
    segment_ids = torch.zeros(len(rows), row_length, dtype=torch.long)
    index = []
    for r, members in enumerate(rows):
        start, entries = 0, []
        for seg, i in enumerate(members, start=1):
            n = len(sequences[i])
            input_ids[r, start : start + n] = sequences[i]
            segment_ids[r, start : start + n] = seg
            entries.append((i, start, n))
            start += n
        index.append(entries)
    return PackedBatch(input_ids, segment_ids, index)


def token_budget_microbatches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Group sample indices into micro-batches whose padded size ``count × longest`` stays within ``max_tokens``.

    Samples are taken longest first, so each micro-batch holds similar lengths and little padding.  Losses stay
    exact whatever the grouping, because they are normalised by global counts (``ppo.algorithms``).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if lengths[i] > max_tokens:
            raise ValueError(f"sample {i} has {lengths[i]} tokens, more than the micro-batch budget {max_tokens}")
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches
