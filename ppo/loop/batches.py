"""Where a step's batch comes from, and what a checkpoint keeps of the next one.

Three ways, chosen by the run's settings:

- **now** (the default order): the step hands the GPUs to generation and collects its batch;
- **beside the critic** (``trainer.critic_beside_generation``): the previous step collected it while the critic's
  epochs ran (:meth:`StepBatches.prefetch`); a checkpoint keeps the loader's state from before it, so that a resumed
  run collects it again with the same weights and seed;
- **ahead** (``trainer.max_staleness`` >= 1, :mod:`ppo.loop.off_policy`): a thread collected it during the previous
  step with the weights the engines held then; a checkpoint keeps the batch itself, whose weights are older than the
  checkpoint's.

A collection the recipe stops (dynamic sampling out of tries) raises
:class:`ppo.rollout.collect.CollectionStopped`; the trainer turns it into a stop of the run.
"""

from __future__ import annotations

from pathlib import Path

from ppo.data import PromptLoader
from ppo.data.batch import Batch
from ppo.loop.clock import StepClock
from ppo.loop.off_policy import CollectAhead, Collected, check_staleness, load_in_flight, save_in_flight
from ppo.rollout.collect import Collector
from ppo.workers.traffic import Shipper


class StepBatches:
    """Each step's batch (:meth:`next`), collected now, beside the critic or ahead; ``gpus`` is the run's
    :class:`ppo.loop.gpu_turns.GpuTurns` (handed to generation before a collection in the driver)."""

    def __init__(self, collector: Collector, loader: PromptLoader, clock: StepClock, shipper: Shipper, gpus, *,
                 ahead: CollectAhead | None = None, max_staleness: int = 0, max_steps: int):
        self.collector, self.loader, self.clock, self.shipper, self.gpus = collector, loader, clock, shipper, gpus
        self.ahead, self.max_staleness, self.max_steps = ahead, max_staleness, max_steps
        self.ready: Collected | None = None  # the next step's batch, collected beside the critic or ahead
        self.loader_state_before_prefetch: dict | None = None

    def next(self, step: int) -> tuple[Batch, dict]:
        """Step ``step``'s batch and its environment metrics."""
        if self.ready is None and self.ahead is not None:  # the first step, or resumed with none in flight
            self.ahead.start(step, policy_version=step)
            self.wait_for_ahead()
        if self.ready is None:
            with self.clock.timed("generation"):
                self.gpus.hand_to("generate")
                return self.collector.collect(step)
        batch, env_metrics, timings, sent = self.ready
        self.clock.timings.update(timings)
        self.shipper.bytes += sent  # its prompts count in the step that trains on it, as in order
        self.ready = self.loader_state_before_prefetch = None
        if self.ahead is not None:
            check_staleness(batch, step, self.max_staleness)
        return batch, env_metrics

    def prefetch(self, step: int) -> None:
        """Collect step ``step``'s batch now, in the driver (while the critic trains beside generation)."""
        self.loader_state_before_prefetch = self.loader.state_dict()
        outer, self.clock.timings = self.clock.timings, {}
        sent = self.shipper.bytes
        try:
            with self.clock.timed("generation"):
                self.gpus.hand_to("generate")
                batch, env_metrics = self.collector.collect(step)
            self.ready = (batch, env_metrics, self.clock.timings, self.shipper.bytes - sent)
            self.shipper.bytes = sent
        finally:
            self.clock.timings = outer

    def start_ahead(self, step: int) -> None:
        """Off-policy: start collecting step ``step``'s batch with the weights the engines hold, those of the step
        before it."""
        if self.ahead is not None and step < self.max_steps:
            self.ahead.start(step, policy_version=step - 1)

    def wait_for_ahead(self) -> None:
        """The batch collected ahead, ready for the next step (none started: nothing)."""
        if self.ahead is None or not self.ahead.running:
            return
        with self.clock.timed("waiting_for_generation"):
            self.ready = self.ahead.wait()

    def checkpoint_state(self) -> tuple[dict, Collected | None]:
        """What a checkpoint taken now keeps: the loader's state, and the batch in flight (collected ahead) if any."""
        if self.ahead is not None:
            return self.loader.state_dict(), self.ready
        if self.ready is not None:
            return self.loader_state_before_prefetch, None
        return self.loader.state_dict(), None

    def save_in_flight(self, in_flight: Collected | None):
        """The checkpoint writer's ``extra`` for ``in_flight`` (None with nothing in flight)."""
        return None if in_flight is None else (lambda directory: save_in_flight(directory, in_flight))

    def resume(self, checkpoint: Path) -> None:
        """A resumed run trains next on the batch the checkpoint kept in flight (off-policy)."""
        if self.ahead is not None:
            self.ready = load_in_flight(checkpoint)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
