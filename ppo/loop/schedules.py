"""How the critic's work interleaves with the policy's within a PPO step, chosen once per run
(:func:`critic_schedule`), so that the step reads the same whichever it is:

- :class:`InOrder`: V, then ``logp_old``; each epoch the critic's minibatches, then the actor's.
- :class:`Overlapped` (``trainer.overlap_critic``): the critic's forward pass and each of its epochs run while the
  policy does its own.
- :class:`BesideGeneration` (``trainer.critic_beside_generation``, ranks on CPUs): V as in order; the critic's
  epochs start after the refit, and the loop collects the next step's batch while they run.

A schedule is given the groups, the step's clock and the numbers it needs (:class:`Epochs`), never the trainer; what
changes per step (the step, the batch) comes with each call.  The critic and the policy read and write disjoint
state, so every schedule gives the same numbers (``tests/trainer/test_feature_matrix.py`` compares them).  Without
a critic the schedule is :class:`InOrder`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ppo.cluster.deadline import Pending
from ppo.data.batch import Batch
from ppo.loop.clock import StepClock
from ppo.loop.forward import CriticView, LogprobSource, old_logprobs
from ppo.loop.settings import PPOSettings
from ppo.seeds import derive_seed
from ppo.workers.group import PolicyGroup, ValueGroup


@dataclass
class ForwardPasses:
    """What the step's forward passes give for a batch (before any update)."""

    values: torch.Tensor | None  # V [B, T] on the batch's columns, 0 off the response mask; None without a critic
    logp_old: torch.Tensor  # [B, T]
    logp_ref: torch.Tensor | None  # under the frozen reference, when a KL term needs it
    probe: dict[str, float]  # train/token_mult_prob_error when logp_old came from the engine

    def fields(self) -> dict[str, torch.Tensor]:
        """The batch fields the update reads."""
        named = {"values": self.values, "logp_old": self.logp_old, "logp_ref": self.logp_ref}
        return {name: value for name, value in named.items() if value is not None}


@dataclass(frozen=True)
class Epochs:
    """A step's passes over its batch: the policy's and the critic's epochs, their minibatches, and the seed their
    minibatch orders derive from."""

    policy: int
    policy_minibatches: int
    critic: int
    critic_minibatches: int
    seed: int

    @classmethod
    def of(cls, settings: PPOSettings, seed: int) -> Epochs:
        return cls(policy=settings.ppo_epochs, policy_minibatches=settings.num_minibatches,
                   critic=settings.ppo_epochs if settings.critic_epochs is None else settings.critic_epochs,
                   critic_minibatches=settings.critic_minibatches or settings.num_minibatches, seed=seed)

    def minibatch_seed(self, step: int, epoch: int) -> int:
        return derive_seed(self.seed, "minibatch_order", step, epoch)


@dataclass
class CriticEpochs:
    """The critic's epochs started after the refit (:meth:`InOrder.start_after_refit`); :meth:`finish` waits for
    them.  Empty where the schedule trains the critic within the update."""

    clock: StepClock | None = None
    epochs: tuple[Pending, ...] = ()
    started: float = 0.0

    @property
    def running(self) -> bool:
        return bool(self.epochs)

    def finish(self) -> list[dict]:
        """Each of the epochs' optimizer-step records (``timing/train/critic_beside_generation`` from their start)."""
        if not self.running:
            return []
        self.clock.phase = "critic_beside_generation"
        records = [record for epoch in self.epochs for record in epoch.first()]
        self.clock.record("critic_beside_generation", self.started)
        return records


class InOrder:
    """V, then ``logp_old``; each epoch the critic's minibatches, then the actor's."""

    overlap = False

    def __init__(self, policy: PolicyGroup, critic: ValueGroup | None, clock: StepClock, *, epochs: Epochs,
                 logprobs: LogprobSource, critic_view: CriticView, critic_threads: int | None = None):
        """``clock``: where the forward passes are timed; ``critic_threads``: the critic's torch threads while it
        trains beside generation."""
        self.policy, self.critic, self.clock = policy, critic, clock
        self.epochs, self.logprobs, self.critic_view = epochs, logprobs, critic_view
        self.critic_threads = critic_threads

    def forward(self, batch: Batch) -> ForwardPasses:
        values = None
        if self.critic is not None:
            with self.clock.timed("values"):
                view = self.critic_view.of(batch)
                values = self.critic_view.back(self.critic.values(view), view, batch) * batch.response_mask
        with self.clock.timed("logprobs"):
            logp_old, logp_ref, probe = old_logprobs(self.policy, batch, self.logprobs)
        return ForwardPasses(values, logp_old, logp_ref, probe)

    def start_critic_epoch(self, critic_batch: Batch, step: int, epoch: int) -> Pending | None:
        """The critic's epoch ``epoch`` started, or None when it has no epoch here."""
        if self.critic is None or epoch >= self.epochs.critic:
            return None
        return self.critic.train_async(critic_batch, num_minibatches=self.epochs.critic_minibatches,
                                       seed=self.epochs.minibatch_seed(step, epoch))

    def update(self, batch: Batch, critic_batch: Batch | None, *, step: int, train_policy: bool) -> tuple[list, list]:
        """Step ``step``'s epochs: each optimizer step's records of the policy and of the critic."""
        policy_steps, critic_steps = [], []
        for epoch in range(max(self.epochs.policy, self.epochs.critic)):
            critic_epoch = self.start_critic_epoch(critic_batch, step, epoch)
            if critic_epoch is not None and not self.overlap:
                critic_steps += critic_epoch.first()
                critic_epoch = None
            if train_policy and epoch < self.epochs.policy:
                policy_steps += self.policy.train(batch, num_minibatches=self.epochs.policy_minibatches,
                                                  seed=self.epochs.minibatch_seed(step, epoch),
                                                  temperature=self.logprobs.temperature)
            if critic_epoch is not None:
                critic_steps += critic_epoch.first()
        return policy_steps, critic_steps

    def start_after_refit(self, critic_batch: Batch | None, *, step: int) -> CriticEpochs:
        """The critic's epochs left for after the refit, started (none in order)."""
        return CriticEpochs()


class Overlapped(InOrder):
    """The critic's forward pass runs while the policy computes its logprobs, and each critic epoch beside the
    actor's."""

    overlap = True

    def forward(self, batch: Batch) -> ForwardPasses:
        with self.clock.timed("values_and_logprobs"):
            view = self.critic_view.of(batch)
            pending = self.critic.values_async(view)
            logp_old, logp_ref, probe = old_logprobs(self.policy, batch, self.logprobs)
            self.clock.phase = "values"
            values = self.critic_view.back(pending.first(), view, batch) * batch.response_mask
        return ForwardPasses(values, logp_old, logp_ref, probe)


class BesideGeneration(InOrder):
    """V as in order; the critic's epochs wait for the refit and run while the engines collect the next batch."""

    def start_critic_epoch(self, critic_batch: Batch, step: int, epoch: int) -> Pending | None:
        return None

    def start_after_refit(self, critic_batch: Batch | None, *, step: int) -> CriticEpochs:
        """The critic's epochs on this step's batch, started: they run while the loop collects the next batch.

        An actor runs its calls in order, so the epochs stay sequential; the next step's values still come from the
        updated critic."""
        started = time.perf_counter()
        self.clock.phase = "critic_beside_generation"
        epochs = tuple(self.critic.train_async(critic_batch, num_minibatches=self.epochs.critic_minibatches,
                                               num_threads=self.critic_threads,
                                               seed=self.epochs.minibatch_seed(step, epoch))
                       for epoch in range(self.epochs.critic))
        return CriticEpochs(self.clock, epochs, started)


def critic_schedule(policy: PolicyGroup, critic: ValueGroup | None, clock: StepClock, *, beside_generation: bool,
                    overlap: bool, **inputs) -> InOrder:
    """The run's schedule: beside generation where the plan allows it (``beside_generation``), else overlapped when
    ``trainer.overlap_critic`` asks for it (``overlap``), else in order.  ``inputs``: :class:`InOrder`'s."""
    if critic is None:
        return InOrder(policy, critic, clock, **inputs)
    if beside_generation:
        return BesideGeneration(policy, critic, clock, **inputs)
    return (Overlapped if overlap else InOrder)(policy, critic, clock, **inputs)
