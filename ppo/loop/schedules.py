"""How the critic's work interleaves with the policy's within a PPO step, chosen once per run
(:func:`critic_schedule`), so that the step reads the same whichever it is:

- :class:`InOrder`: V, then ``logp_old``; each epoch the critic's minibatches, then the actor's.
- :class:`Overlapped` (``trainer.overlap_critic``): the critic's forward pass and each of its epochs run while the
  policy does its own.
- :class:`BesideGeneration` (``trainer.critic_beside_generation``, ranks on CPUs): V as in order; the critic's
  epochs run after the refit, while the engines collect the next step's batch.

The critic and the policy read and write disjoint state, so every schedule gives the same numbers
(``tests/trainer/test_feature_matrix.py`` compares them).  Without a critic the schedule is :class:`InOrder`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppo.seeds import derive_seed


@dataclass
class Evaluation:
    """What the step's forward passes give for a batch (before any update)."""

    values: torch.Tensor | None  # V [B, T] on the batch's columns, 0 off the response mask; None without a critic
    logp_old: torch.Tensor  # [B, T]
    logp_ref: torch.Tensor | None  # under the frozen reference, when a KL term needs it
    probe: dict[str, float]  # train/token_mult_prob_error when logp_old came from the engine

    def fields(self) -> dict[str, torch.Tensor]:
        """The batch fields the update reads."""
        named = {"values": self.values, "logp_old": self.logp_old, "logp_ref": self.logp_ref}
        return {name: value for name, value in named.items() if value is not None}


class InOrder:
    """V, then ``logp_old``; each epoch the critic's minibatches, then the actor's."""

    overlap = False

    def __init__(self, trainer):
        self.trainer = trainer
        cfg = trainer.cfg
        self.policy_epochs = cfg.ppo_epochs
        self.critic_epochs = cfg.ppo_epochs if cfg.critic_epochs is None else cfg.critic_epochs
        self.critic_minibatches = cfg.critic_minibatches or cfg.num_minibatches

    @property
    def critic(self):
        return self.trainer.critic

    def evaluate(self, batch: dict) -> Evaluation:
        t, values = self.trainer, None
        if self.critic is not None:
            with t.timed("values"):
                view = t.critic_view(batch)
                values = t.from_critic_view(self.critic.values(view), view, batch) * batch["response_mask"]
        with t.timed("logprobs"):
            logp_old, logp_ref, probe = t.old_logprobs(batch)
        return Evaluation(values, logp_old, logp_ref, probe)

    def seed(self, epoch: int) -> int:
        return derive_seed(self.trainer.exp.seed, "minibatch_order", self.trainer.step, epoch)

    def start_critic_epoch(self, critic_batch: dict, epoch: int):
        """The critic's epoch ``epoch`` started (a :class:`ppo.cluster.deadline.Pending`), or None when it has no
        epoch here."""
        if self.critic is None or epoch >= self.critic_epochs:
            return None
        return self.critic.train_async(critic_batch, num_minibatches=self.critic_minibatches, seed=self.seed(epoch))

    def update(self, batch: dict, critic_batch: dict | None, *, train_policy: bool) -> tuple[list, list]:
        """The step's epochs: each optimizer step's records of the policy and of the critic."""
        t = self.trainer
        policy_steps, critic_steps = [], []
        for epoch in range(max(self.policy_epochs, self.critic_epochs)):
            critic_epoch = self.start_critic_epoch(critic_batch, epoch)
            if critic_epoch is not None and not self.overlap:
                critic_steps += critic_epoch.first()
                critic_epoch = None
            if train_policy and epoch < self.policy_epochs:
                policy_steps += t.policy.train(batch, num_minibatches=t.cfg.num_minibatches, seed=self.seed(epoch),
                                               temperature=t.exp.generation.sampling.temperature)
            if critic_epoch is not None:
                critic_steps += critic_epoch.first()
        return policy_steps, critic_steps

    def after_refit(self, critic_batch: dict | None) -> list:
        """The critic's optimizer-step records of work left for after the refit (none in order)."""
        return []


class Overlapped(InOrder):
    """The critic's forward pass runs while the policy computes its logprobs, and each critic epoch beside the
    actor's."""

    overlap = True

    def evaluate(self, batch: dict) -> Evaluation:
        t = self.trainer
        with t.timed("values_and_logprobs"):
            view = t.critic_view(batch)
            pending = self.critic.values_async(view)
            logp_old, logp_ref, probe = t.old_logprobs(batch)
            t.current_phase = "values"
            values = t.from_critic_view(pending.first(), view, batch) * batch["response_mask"]
        return Evaluation(values, logp_old, logp_ref, probe)


class BesideGeneration(InOrder):
    """V as in order; the critic's epochs wait for the refit and run while the engines collect the next batch."""

    def start_critic_epoch(self, critic_batch: dict, epoch: int):
        return None

    def after_refit(self, critic_batch: dict | None) -> list:
        """The critic's epochs on this step's batch while the engines collect the next one
        (:meth:`ppo.loop.trainer.PPOTrainer.prefetch`).

        An actor runs its calls in order, so the epochs stay sequential; the next step's values still come from the
        updated critic."""
        t = self.trainer
        threads = t.exp.critic.num_threads_beside_generation
        with t.timed("critic_beside_generation"):
            epochs = [self.critic.train_async(critic_batch, num_minibatches=self.critic_minibatches,
                                              num_threads=threads, seed=self.seed(epoch))
                      for epoch in range(self.critic_epochs)]
            if t.step + 1 < t.cfg.max_steps:
                t.prefetch()
                t.current_phase = "critic_beside_generation"
            return [record for epoch in epochs for record in epoch.first()]


def critic_schedule(trainer, *, beside_generation: bool):
    """The run's schedule: beside generation where the plan allows it (``beside_generation``), else overlapped when
    ``trainer.overlap_critic`` asks for it, else in order."""
    if trainer.critic is None:
        return InOrder(trainer)
    if beside_generation:
        return BesideGeneration(trainer)
    return Overlapped(trainer) if trainer.cfg.overlap_critic else InOrder(trainer)
