"""Generation that never waits (``trainer.max_staleness`` = k >= 1): the engines collect the next step's batch with
the weights they hold while this step's critic and policy train, and are refitted after the update, between two
generation waves.

One wave is in flight at a time (:class:`CollectAhead`): the batch trained at step t was generated during step t-1
with the weights of step t-1, so every sample after the first step is exactly one update old, whatever k >= 1 is
(the trainer refuses a batch older than k, :func:`check_staleness`).  The collection runs in a thread of the driver:
it is a chain of blocking calls (generate, score, regenerate for dynamic sampling, shape), and so is the training
(forward passes, advantages in the driver, epochs); a thread lets both stay the plain sequential code they are at
k = 0, each waiting on its own Ray calls with the GIL released.  The thread has its own clock and its own count of
the bytes the driver sends the engines, and touches nothing the training reads until :meth:`CollectAhead.wait`.

The loss is the decoupled objective: ``logp_old`` is recomputed by the policy before its update (the proximal
policy; the PPO ratio clips against it), and each token is weighed by ``policy.loss.is_correction``'s weight from the
engine's logprobs (the behaviour policy) to ``logp_old`` (:func:`with_behaviour_correction`).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from ppo.algorithms.kl import kl_penalty
from ppo.algorithms.masked import masked_max, masked_mean, masked_min
from ppo.data.batch import Batch
from ppo.loop.clock import StepClock
from ppo.workers.traffic import Shipper

IN_FLIGHT = "in_flight.pt"
"""A checkpoint's batch in flight: collected during the step it was taken after, to be trained on by the next."""

DEFAULT_CORRECTION = "tis"
"""The behaviour → proximal weight where the experiment names none: capped at ``policy.loss.is_cap``."""

Collected = tuple[Batch, dict, dict, int]
"""A collected batch, its environment metrics, the collection's timings and the bytes the driver sent for it."""


def with_behaviour_correction(experiment):
    """``experiment`` with ``policy.loss.is_correction`` = :data:`DEFAULT_CORRECTION` where it is off-policy
    (``trainer.max_staleness`` >= 1) and names none; else ``experiment`` itself."""
    loss = experiment.policy.loss
    if not experiment.trainer.max_staleness or loss.is_correction is not None:
        return experiment
    policy = dataclasses.replace(experiment.policy, loss=dataclasses.replace(loss, is_correction=DEFAULT_CORRECTION))
    return dataclasses.replace(experiment, policy=policy)


class CollectAhead:
    """One batch collected in a thread at a time: :meth:`start` it, :meth:`wait` for it.

    ``collect(step, policy_version)`` is a :class:`ppo.rollout.collect.Collector`'s, timing its parts into
    ``clock`` (this thread's own); ``engines`` get a :class:`ppo.workers.traffic.Shipper` of their own that counts
    what the driver sends them, so that the training's count is never written from two threads."""

    def __init__(self, collect, clock: StepClock, engines):
        self.collect_batch, self.clock = collect, clock
        self.meter = engines.shipper = Shipper()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collect-ahead")
        self.pending: Future | None = None

    @property
    def running(self) -> bool:
        return self.pending is not None

    def start(self, step: int, policy_version: int) -> None:
        """Collect step ``step``'s batch with the engines' weights, those of step ``policy_version``."""
        self.pending = self.pool.submit(self.collect, step, policy_version)

    def collect(self, step: int, policy_version: int) -> Collected:
        self.clock.timings, self.meter.bytes = {}, 0
        with self.clock.timed("generation"):
            batch, env_metrics = self.collect_batch(step, policy_version=policy_version)
        return batch, env_metrics, self.clock.timings, self.meter.bytes

    def wait(self) -> Collected:
        """The batch started last (its collection's exception, if it raised)."""
        pending, self.pending = self.pending, None
        return pending.result()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def check_staleness(batch: Batch, step: int, max_staleness: int) -> None:
    """Refuse a batch with a sample generated more than ``max_staleness`` updates before ``step``."""
    oldest = step - int(batch.policy_version.min())
    if oldest > max_staleness:
        raise RuntimeError(f"step {step}'s batch has samples {oldest} updates old, more than "
                           f"trainer.max_staleness={max_staleness}")


def off_policy_metrics(batch: Batch, step: int) -> dict[str, float]:
    """How far the batch is from the policy that trains on it: ``train/staleness_mean|max`` (updates between the
    sample's policy and step ``step``'s), the behaviour → proximal importance weight ``exp(logp_old − logp_gen)``
    before truncation (``train/is_weight_mean|min|max``; ``train/is_oob_ratio`` is the share truncated) and
    ``train/kl_behaviour_to_current``, KL(behaviour ‖ the policy before this step's update), the k3 estimate on the
    behaviour's own samples."""
    staleness = (step - batch.policy_version).float()
    mask = batch.response_mask
    log_w = batch.logp_old - batch.logp_gen
    weights = torch.exp(log_w.clamp(-20, 20))
    return {
        "train/staleness_mean": staleness.mean().item(),
        "train/staleness_max": staleness.max().item(),
        "train/is_weight_mean": masked_mean(weights, mask).item(),
        "train/is_weight_min": masked_min(weights, mask).item(),
        "train/is_weight_max": masked_max(weights, mask).item(),
        "train/kl_behaviour_to_current": masked_mean(kl_penalty(batch.logp_gen, batch.logp_old, "k3"), mask).item(),
    }


def save_in_flight(directory: Path, collected: Collected) -> None:
    """The batch in flight into a checkpoint being written (``directory``), so that a resumed run trains on it."""
    batch, env_metrics, timings, sent = collected
    torch.save({"batch": batch.fields(), "env_metrics": env_metrics, "timings": timings, "sent": sent},
               directory / IN_FLIGHT)


def load_in_flight(checkpoint: Path) -> Collected | None:
    """The checkpoint's batch in flight (None when it was taken with none)."""
    path = checkpoint / IN_FLIGHT
    if not path.is_file():
        return None
    saved = torch.load(path, weights_only=True)
    return Batch.from_fields(saved["batch"]), saved["env_metrics"], saved["timings"], saved["sent"]
