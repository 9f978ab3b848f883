"""Where a step's batch comes from, and what a checkpoint keeps of the next one.

Three ways, chosen by the run's settings:

- **now** (the default order): the step hands the GPUs to generation and collects its batch;
- **beside the critic** (``trainer.critic_beside_generation``): the previous step collected it while the critic's
  epochs ran (:meth:`StepBatches.prefetch`); a checkpoint keeps the loader's state from before it, so that a resumed
  run collects it again with the same weights and seed;
- **ahead** (``trainer.max_staleness`` = k >= 1, :mod:`ppo.loop.off_policy`): a thread collected it during the
  step k before it (or, for the first k+1 steps, with the starting weights); a checkpoint keeps the k batches in
  flight themselves, whose weights are older than the checkpoint's.  A run resumed at a smaller k drops those that
  would be too old (:meth:`StepBatches.resume` says so).

A collection the recipe stops (dynamic sampling out of tries) raises
:class:`ppo.rollout.collect.CollectionStopped`; the trainer turns it into a stop of the run.
"""

from __future__ import annotations

from pathlib import Path

from ppo.data import PromptLoader
from ppo.data.batch import Batch
from ppo.loop import off_policy
from ppo.loop.clock import StepClock
from ppo.loop.off_policy import CollectAhead, Collected, check_staleness, usable_in_flight, waves_to_start
from ppo.rollout.collect import Collector
from ppo.workers.traffic import Shipper


class StepBatches:
    """Each step's batch (:meth:`next`), collected now, beside the critic or ahead; ``gpus`` is the run's
    :class:`ppo.loop.gpu_turns.GpuTurns` (handed to generation before a collection in the driver)."""

    def __init__(self, collector: Collector, loader: PromptLoader, clock: StepClock, shipper: Shipper, gpus, *,
                 ahead: CollectAhead | None = None, max_staleness: int = 0, max_steps: int):
        self.collector, self.loader, self.clock, self.shipper, self.gpus = collector, loader, clock, shipper, gpus
        self.ahead, self.max_staleness, self.max_steps = ahead, max_staleness, max_steps
        self.ready: Collected | None = None  # the next step's batch, collected beside the critic
        self.loader_state_before_prefetch: dict | None = None

    def next(self, step: int) -> tuple[Batch, dict]:
        """Step ``step``'s batch and its environment metrics."""
        if self.ahead is not None:
            if not self.ahead.in_flight:  # the first step, or resumed with none in flight
                self.ahead.start(step, policy_version=step)
                self.wait_for_ahead()
            batch, env_metrics = self.use(self.ahead.take())
            check_staleness(batch, step, self.max_staleness)
            return batch, env_metrics
        if self.ready is None:
            with self.clock.timed("generation"):
                self.gpus.hand_to("generate")
                return self.collector.collect(step)
        collected, self.ready = self.ready, None
        self.loader_state_before_prefetch = None
        return self.use(collected)

    def use(self, collected: Collected) -> tuple[Batch, dict]:
        """A batch collected before its step: its collection's timings and bytes count in the step that trains on
        it, as in order."""
        batch, env_metrics, timings, sent = collected
        self.clock.timings.update(timings)
        self.shipper.bytes += sent
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
        """Off-policy, once step ``step`` has its batch: start collecting the batches of the steps up to
        ``max_staleness`` ahead (:func:`ppo.loop.off_policy.waves_to_start`) with the weights the engines hold,
        those of step ``step``."""
        if self.ahead is None:
            return
        for ahead in waves_to_start(step, self.ahead.in_flight, self.max_staleness, self.max_steps):
            self.ahead.start(ahead, policy_version=step)

    def wait_for_ahead(self) -> None:
        """Until the batches collected ahead are (the engines idle, for the refit); none started: nothing.  The
        waits of a step add up (the first step waits for its own batch too)."""
        if self.ahead is None or not self.ahead.in_flight:
            return
        self.clock.phase = "waiting_for_generation"
        with self.clock.timed_part("waiting_for_generation"):
            self.ahead.wait()

    def checkpoint_state(self) -> tuple[dict, list[Collected]]:
        """What a checkpoint taken now keeps: the loader's state, and the batches in flight (collected ahead)."""
        if self.ahead is not None:
            return self.loader.state_dict(), self.ahead.wait()
        if self.ready is not None:
            return self.loader_state_before_prefetch, []
        return self.loader.state_dict(), []

    def save_in_flight(self, in_flight: list[Collected]):
        """The checkpoint writer's ``extra`` for ``in_flight`` (None with nothing in flight)."""
        return (lambda directory: off_policy.save_in_flight(directory, in_flight)) if in_flight else None

    def resume(self, checkpoint: Path, step: int) -> None:
        """A run resumed at step ``step`` trains next on the batches the checkpoint kept in flight (off-policy), as
        many as its ``max_staleness`` allows (:func:`ppo.loop.off_policy.usable_in_flight`); it says what it drops,
        whose prompts the loader has gone past."""
        in_flight = off_policy.load_in_flight(checkpoint)
        kept = usable_in_flight([int(b.policy_version.min()) for b, *_ in in_flight], step, self.max_staleness)
        if kept < len(in_flight):
            dropped = sum(b.rows for b, *_ in in_flight[kept:])
            print(f"[ppo] resumed at trainer.max_staleness={self.max_staleness}: {len(in_flight) - kept} of the "
                  f"checkpoint's {len(in_flight)} batches in flight would train too old; dropped ({dropped} samples, "
                  f"whose prompts are not collected again)", flush=True)
        if self.ahead is not None:
            self.ahead.resume(in_flight[:kept])

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
