"""The step's forward passes before any update: ``logp_old`` (and ``logp_ref``) from the policy, and the batch as the
critic reads it (:class:`CriticView`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppo.algorithms.masked import masked_mean
from ppo.data.batch import Batch, select
from ppo.loop.settings import MISMATCH_PROBE_EVERY
from ppo.rollout.critic_view import with_prefixes, without_prefixes
from ppo.workers.group import PolicyGroup


@dataclass(frozen=True)
class LogprobSource:
    """How the step gets its logprobs: ``old`` is ``trainer.old_logprobs`` (``"policy"`` recomputes them, ``"engine"``
    takes the engine's ``logp_gen``), at the sampling ``temperature``; ``reference``: also ``logp_ref``, for a KL
    term."""

    old: str
    temperature: float
    reference: bool


def old_logprobs(policy: PolicyGroup, batch: Batch, source: LogprobSource
                 ) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float]]:
    """``(logp_old, logp_ref, probe)``: ``logp_old`` as ``source.old`` says, ``logp_ref`` under the reference when a
    KL term needs it (else None).

    From the engine, the policy still recomputes every ``MISMATCH_PROBE_EVERY``-th sample: their disagreement is the
    probe's ``train/token_mult_prob_error``, which would otherwise be 1 by construction and miss a broken refit.
    (Recomputed, the loss measures it over the whole batch, and the probe is empty.)"""
    probe = {}
    if source.old == "engine":
        logp_old = batch.logp_gen.clone()
        # the probe's rows of what the two logprobs need (the workers are sent its tokens only)
        rows = select(batch.only("input_ids", "segment_ids", "logp_gen", "response_mask"),
                      range(0, batch.rows, MISMATCH_PROBE_EVERY))
        tokens = rows.only("input_ids", "segment_ids")
        recomputed = policy.logprobs(tokens, temperature=source.temperature)
        probe["train/token_mult_prob_error"] = masked_mean(torch.exp((rows.logp_gen - recomputed).abs()),
                                                           rows.response_mask).item()
    else:
        logp_old = policy.logprobs(batch, temperature=source.temperature)
    logp_ref = None
    if source.reference:
        logp_ref = policy.logprobs(batch, temperature=source.temperature, reference=True)
    return logp_old, logp_ref, probe


class CriticView:
    """The batch as the critic reads it: itself, or with ``critic.reference_answer`` each row led by its reference
    answer and ``<eos>`` (``ppo.rollout.critic_view``; ``prefix_lengths`` says how far each row moved)."""

    def __init__(self, tokenizer, *, reference_answer: bool):
        self.tokenizer, self.reference_answer = tokenizer, reference_answer

    def of(self, batch: Batch) -> Batch:
        if not self.reference_answer:
            return batch
        answers = self.tokenizer(batch.ground_truths, add_special_tokens=False)["input_ids"]
        return with_prefixes(batch, [ids + [self.tokenizer.eos_token_id] for ids in answers])

    @staticmethod
    def back(values: torch.Tensor, view: Batch, batch: Batch) -> torch.Tensor:
        """The critic's values on ``view`` put back on the columns of ``batch`` (undoing :meth:`of`)."""
        if not view.has("prefix_lengths"):
            return values
        return without_prefixes(values, view.prefix_lengths, batch.width)
