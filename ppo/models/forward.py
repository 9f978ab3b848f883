"""Forward passes shared by the actor and the critic: attention masks for padded or packed rows, hidden states,
and next-token logprobs computed chunk by chunk.

Batches are ``[B, T]`` token ids with ``segment_ids`` ``[B, T]``: 0 on padding, and 1, 2, … for the sequences packed
in a row (a plain padded batch has one segment per row).  Attention never crosses segments, and positions restart
at 0 in each segment, so a packed row computes exactly what the separate padded rows would.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from ppo.models import layers


def attention_mask_and_positions(segment_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Megatron's bool mask ``[B, 1, T, T]`` (True = masked: causal OR other segment OR padding) and position ids.

    A padding query attends to itself only, so no row of the softmax is empty.
    """
    _, length = segment_ids.shape
    same = segment_ids.unsqueeze(-1) == segment_ids.unsqueeze(-2)
    causal = torch.ones(length, length, dtype=torch.bool, device=segment_ids.device).tril()
    allowed = same & causal & (segment_ids != 0).unsqueeze(-2)
    allowed |= torch.eye(length, dtype=torch.bool, device=segment_ids.device)
    return ~allowed.unsqueeze(1), segment_positions(segment_ids)


def segment_positions(segment_ids: torch.Tensor) -> torch.Tensor:
    """Position ids that restart at 0 in each segment (0 on padding)."""
    starts = torch.ones_like(segment_ids, dtype=torch.bool)
    starts[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    index = torch.arange(segment_ids.shape[1], device=segment_ids.device).expand_as(segment_ids)
    last_start = torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values
    return (index - last_start) * (segment_ids != 0)


def _mask_and_positions(model, segment_ids: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The local spec takes the dense mask.  Transformer Engine's spec applies its own causal mask (flash attention,
    no ``T × T`` tensor), which is exact for rows of one right-padded sequence, the rows the workers build; packed
    rows would need its THD format, which is not wired."""
    if getattr(model, "transformer_impl", layers.LOCAL) == layers.LOCAL:
        return attention_mask_and_positions(segment_ids)
    if bool((segment_ids > 1).any()):
        raise ValueError("packed rows (several segments in a row) need transformer_impl='local'")
    return None, segment_positions(segment_ids)


def hidden_states(model, input_ids: torch.Tensor, segment_ids: torch.Tensor, *,
                  vocab_parallel_head: bool = True) -> torch.Tensor:
    """Final hidden states ``[T, B, H]`` (after the final norm), without computing the output layer.

    With sequence parallelism the decoder leaves each TP rank a slice of the sequence; the slices are gathered here
    because the heads need whole rows.  In backward a vocabulary-parallel head's input gradients are partial sums
    (each rank holds part of the vocabulary) and are reduce-scattered; a replicated head's (the critic's) are whole
    on every rank and are only split (``vocab_parallel_head=False``).
    """
    mask, positions = _mask_and_positions(model, segment_ids)
    saved = model.post_process
    model.post_process = False
    try:
        hidden = model(input_ids, positions, attention_mask=mask)
    finally:
        model.post_process = saved
    if model.config.sequence_parallel:
        from megatron.core.tensor_parallel import gather_from_sequence_parallel_region

        hidden = gather_from_sequence_parallel_region(hidden, tensor_parallel_output_grad=vocab_parallel_head)
    return hidden


def _output_weight(model):
    return model.shared_embedding_or_output_weight() if model.share_embeddings_and_output_weights else None


def full_logits(model, input_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
    """All logits ``[B, T, V]`` gathered over TP ranks; for tests and small models (materialises T·V)."""
    from megatron.core.tensor_parallel import gather_from_tensor_model_parallel_region

    hidden = hidden_states(model, input_ids, segment_ids)
    logits, _ = model.output_layer(hidden, weight=_output_weight(model))
    return gather_from_tensor_model_parallel_region(logits).transpose(0, 1)


def token_logprobs(
    model,
    input_ids: torch.Tensor,
    segment_ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 512,
) -> torch.Tensor:
    """``logp[b, t] = log π(x_t | x_<t)`` under ``softmax(logits / temperature)``; 0 where t starts a segment.

    The output layer and the vocab-parallel cross-entropy run over ``chunk_size`` positions at a time, and with
    autograd each chunk is recomputed in backward instead of keeping its logits, so peak memory grows with
    ``chunk_size × vocab``, not with ``T × vocab`` (``bench/logprobs.py`` measures it).
    """
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    hidden = hidden_states(model, input_ids, segment_ids)[:-1]
    targets = input_ids[:, 1:].transpose(0, 1).contiguous()
    weight = _output_weight(model)

    def chunk_logprobs(hidden_chunk, target_chunk):
        logits, _ = model.output_layer(hidden_chunk, weight=weight)
        logits = logits.float()
        if temperature != 1.0:
            logits = logits / temperature
        return -vocab_parallel_cross_entropy(logits, target_chunk)

    pieces = []
    for start in range(0, hidden.shape[0], chunk_size):
        args = (hidden[start : start + chunk_size], targets[start : start + chunk_size])
        if torch.is_grad_enabled() and hidden.requires_grad:
            pieces.append(checkpoint(chunk_logprobs, *args, use_reentrant=False))
        else:
            pieces.append(chunk_logprobs(*args))
    logprobs = torch.cat(pieces, dim=0).transpose(0, 1)
    continues = segment_ids[:, 1:] == segment_ids[:, :-1]
    logprobs = logprobs * continues
    return torch.cat([torch.zeros_like(logprobs[:, :1]), logprobs], dim=1)
