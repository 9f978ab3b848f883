"""The critic: the policy's backbone with a scalar head ``Linear(hidden, 1)`` in place of the vocabulary projection.

The head replaces ``output_layer`` and keeps its call signature (returns ``(out, None)``), so it is part of the
model's ``state_dict``/``sharded_state_dict`` and checkpoints with it.  No vocabulary logits are ever computed.
"""

from __future__ import annotations

import dataclasses

import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model, torch_dtype
from ppo.models.forward import hidden_states


class ValueHead(torch.nn.Module):
    def __init__(self, hidden_size: int, *, init_std: float = 0.02, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(1, hidden_size, dtype=dtype))
        torch.nn.init.normal_(self.weight, std=init_std)

    def forward(self, hidden: torch.Tensor, weight=None, runtime_gather_output=None):
        return torch.nn.functional.linear(hidden, self.weight), None


def build_value_model(arch: Architecture, *, dtype: str | torch.dtype = torch.float32, init_std: float = 0.02,
                      **overrides):
    """A ``GPTModel`` whose output layer is a ``ValueHead`` (randomly initialised; load ``score.weight`` to warm-start).

    Embeddings are never tied in the critic: its head is not the embedding matrix.
    """
    untied = dataclasses.replace(arch, tie_word_embeddings=False)
    dtype = torch_dtype(dtype)
    model = build_gpt_model(untied, dtype=dtype, **overrides)
    if model.post_process:
        device = next(model.parameters()).device
        model.output_layer = ValueHead(arch.hidden_size, init_std=init_std, dtype=dtype).to(device)
    return model


def token_values(model, input_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
    """``values[b, t] = V(state before token t)``, i.e. the head applied to the hidden state at ``t − 1``.

    Aligned with ``token_logprobs``: position t scores the prefix that token t is sampled from.  Positions that
    start a segment (no prefix in it) and padding are 0.
    """
    hidden = hidden_states(model, input_ids, segment_ids, vocab_parallel_head=False)[:-1]
    head, _ = model.output_layer(hidden)
    values = head.squeeze(-1).transpose(0, 1).float()
    values = values * (segment_ids[:, 1:] == segment_ids[:, :-1])
    return torch.cat([torch.zeros_like(values[:, :1]), values], dim=1)
