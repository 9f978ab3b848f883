"""Generation that never waits (``trainer.max_staleness`` = k >= 1): the engines collect the next step's batch with
the weights they hold while this step's critic and policy train, and are refitted after the update, between two
generation waves.

Up to k batches are collected ahead (:class:`CollectAhead`, :func:`waves_to_start`): the first step's batch and
the next k are generated with the starting weights; after that, while step t trains, the engines generate step
t+k's batch with the weights of step t, so every sample trains exactly min(t, k) updates after the weights that made
it (the trainer refuses one older than k, :func:`check_staleness`).  The lag is fixed, not whatever the timing
allows, so that a run is the same run each time and a resumed one equals it: the waves run one after another in a
single thread, and the refit after step t's update waits for the wave under way (step t+k's); the other k-1 are
already collected.  On this loop a deeper queue therefore costs freshness and buys no speed on even steps (one wave
is generated per step, as at k = 1); it absorbs nothing a free-running collector would (a long wave still holds up
the refit).  The collection runs in a thread of the driver:
it is a chain of blocking calls (generate, score, regenerate for dynamic sampling, shape), and so is the training
(forward passes, advantages in the driver, epochs); a thread lets both stay the plain sequential code they are at
k = 0, each waiting on its own Ray calls with the GIL released.  The thread has its own clock and its own count of
the bytes the driver sends the engines, and touches nothing the training reads until :meth:`CollectAhead.take`.

The loss is the decoupled objective: ``logp_old`` is recomputed by the policy before its update (the proximal
policy; the PPO ratio clips against it), and each token is weighed by ``policy.loss.is_correction``'s weight from the
engine's logprobs (the behaviour policy) to ``logp_old`` (:func:`with_behaviour_correction`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from ppo.algorithms.kl import kl_penalty
from ppo.algorithms.masked import masked_max, masked_mean, masked_min
from ppo.data.batch import Batch
from ppo.loop.clock import StepClock
from ppo.workers.traffic import Shipper

IN_FLIGHT = "in_flight.pt"
"""A checkpoint's batches in flight: collected ahead during the steps before it, to be trained on by the next ones."""

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
    """Batches collected in a thread, one after another: :meth:`start` one, :meth:`take` the oldest, :meth:`wait`
    until the engines are idle.

    ``collect(step, policy_version)`` is a :class:`ppo.rollout.collect.Collector`'s, timing its parts into
    ``clock`` (this thread's own); ``engines`` get a :class:`ppo.workers.traffic.Shipper` of their own that counts
    what the driver sends them, so that the training's count is never written from two threads."""

    def __init__(self, collect, clock: StepClock, engines):
        self.collect_batch, self.clock = collect, clock
        self.meter = engines.shipper = Shipper()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="collect-ahead")
        self.waves: deque[Future] = deque()  # the oldest first: the next step's batch

    @property
    def in_flight(self) -> int:
        """Batches started and not taken (collected, or under way)."""
        return len(self.waves)

    def start(self, step: int, policy_version: int) -> None:
        """Collect step ``step``'s batch with the engines' weights, those of step ``policy_version``."""
        self.waves.append(self.pool.submit(self.collect, step, policy_version))

    def collect(self, step: int, policy_version: int) -> Collected:
        self.clock.timings, self.meter.bytes = {}, 0
        with self.clock.timed("generation"):
            batch, env_metrics = self.collect_batch(step, policy_version=policy_version)
        return batch, env_metrics, self.clock.timings, self.meter.bytes

    def wait(self) -> list[Collected]:
        """Every batch in flight, the oldest first, once all are collected (the engines are idle then); raises the
        exception of a collection that raised."""
        return [wave.result() for wave in self.waves]

    def take(self) -> Collected:
        """The oldest batch in flight, out of the queue (waits for it)."""
        return self.waves.popleft().result()

    def resume(self, collected: list[Collected]) -> None:
        """A checkpoint's batches in flight, as if collected here."""
        for batch in collected:
            done = Future()
            done.set_result(batch)
            self.waves.append(done)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def waves_to_start(step: int, in_flight: int, max_staleness: int, max_steps: int) -> range:
    """The steps whose batches to start collecting when step ``step`` has taken its own, with ``in_flight`` batches
    (those of steps step+1 …) already collected or under way: every step up to ``max_staleness`` ahead, none past the
    run's last step (``max_steps`` - 1).  Started now, they are generated with the weights of step ``step``."""
    return range(step + 1 + in_flight, min(step + max_staleness, max_steps - 1) + 1)


def usable_in_flight(versions: list[int], step: int, max_staleness: int) -> int:
    """How many of a checkpoint's batches in flight a run resumed at ``trainer.max_staleness`` = k trains on: they
    are for steps ``step``, step+1, … (``versions``: each one's oldest policy version), and are kept up to the first
    that would train more than k updates after its weights (a run resumed at a smaller k than it was saved with)."""
    for kept, version in enumerate(versions):
        if step + kept - version > max_staleness:
            return kept
    return len(versions)


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


def save_in_flight(directory: Path, collected: list[Collected]) -> None:
    """The batches in flight (the oldest first) into a checkpoint being written (``directory``), so that a resumed
    run trains on them."""
    torch.save([{"batch": batch.fields(), "env_metrics": env_metrics, "timings": timings, "sent": sent}
                for batch, env_metrics, timings, sent in collected], directory / IN_FLIGHT)


def load_in_flight(checkpoint: Path) -> list[Collected]:
    """The checkpoint's batches in flight, the oldest first (none when it was taken with none)."""
    path = checkpoint / IN_FLIGHT
    if not path.is_file():
        return []
    saved = torch.load(path, weights_only=True)
    saved = [saved] if isinstance(saved, dict) else saved  # one batch, as saved before k >= 2 (2026-12-07)
    return [(Batch.from_fields(s["batch"]), s["env_metrics"], s["timings"], s["sent"]) for s in saved]
