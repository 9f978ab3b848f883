"""The off-policy queue (``trainer.max_staleness`` = k), driven the way :class:`ppo.loop.trainer.PPOTrainer` drives
it: take the step's batch, start the batches ahead, train, wait for the engines, refit.  The collection is a plain
function that stamps each batch with the weights the engines hold *when it ends*, so a refit during a wave, or a
stamp that is not the engines' weights, shows.  The real collector, engines and loss at k = 1 are
tests/trainer/test_off_policy.py's runs.
"""

from __future__ import annotations

import time

import pytest
import torch

from ppo.data import PromptLoader
from ppo.data.batch import Batch
from ppo.loop.batches import StepBatches
from ppo.loop.clock import StepClock
from ppo.loop.off_policy import CollectAhead, usable_in_flight, waves_to_start
from ppo.workers.traffic import Shipper


class Run:
    """A queue at ``max_staleness`` = k over ``max_steps`` steps, the engines' weights (``version``, the step whose
    weights they hold) and every collection: (step, the version it was told, the version the engines held)."""

    def __init__(self, k: int, max_steps: int, version: int = 0):
        self.version, self.collections = version, []
        self.engines = type("Engines", (), {})()  # the queue gives them a byte counter of their own
        ahead = CollectAhead(self.collect, StepClock(), self.engines) if k else None
        self.batches = StepBatches(None, PromptLoader(list(range(8)), 2), StepClock(), Shipper(), None,
                                   ahead=ahead, max_staleness=k, max_steps=max_steps)

    def collect(self, step: int, *, policy_version: int):
        held = self.version
        time.sleep(0.01)  # a wave takes time: a refit before it ends would change the weights under it
        self.collections.append((step, policy_version, held, self.version))
        return Batch(policy_version=torch.full((4,), self.version)), {}

    def train(self, steps: range) -> tuple[list[int], list[int]]:
        """Each step's staleness and the batches in flight while it trains."""
        staleness, in_flight = [], []
        for step in steps:
            batch, _ = self.batches.next(step)
            staleness.append(step - int(batch.policy_version.max()))
            self.batches.start_ahead(step)
            in_flight.append(self.batches.ahead.in_flight)
            self.batches.wait_for_ahead()
            self.version = step + 1  # the refit after the update
        return staleness, in_flight


@pytest.mark.parametrize("k", [1, 2, 3])
def test_up_to_k_batches_are_collected_ahead_and_each_trains_min_step_k_updates_old(k):
    run = Run(k, max_steps=7)
    staleness, in_flight = run.train(range(7))
    assert staleness == [min(step, k) for step in range(7)]
    assert in_flight == [min(k, 6 - step) for step in range(7)]
    assert [step for step, *_ in run.collections] == list(range(7))  # each step's batch once, none past the end
    for step, told, held_at_start, held_at_end in run.collections:
        assert told == held_at_start == held_at_end == max(0, step - k), step


def test_waves_to_start():
    assert list(waves_to_start(0, 0, 2, 10)) == [1, 2]  # the first step: k ahead, with the starting weights
    assert list(waves_to_start(5, 1, 2, 10)) == [7]  # after it one a step: step + k
    assert list(waves_to_start(8, 1, 2, 10)) == []  # none past the last step (9)
    assert list(waves_to_start(3, 0, 4, 10)) == [4, 5, 6, 7]  # resumed with none in flight, or k raised


def checkpoint_after(k: int, steps: int, max_steps: int, directory):
    """An uninterrupted run's staleness, and the in-flight file of a run stopped after ``steps`` steps."""
    stopped = Run(k, max_steps)
    stopped.train(range(steps))
    _, in_flight = stopped.batches.checkpoint_state()
    assert len(in_flight) == k
    stopped.batches.save_in_flight(in_flight)(directory)
    stopped.batches.close()


def test_a_resumed_run_trains_on_the_batches_in_flight_then_goes_on(tmp_path):
    checkpoint_after(2, 3, 7, tmp_path)
    resumed = Run(2, max_steps=7, version=3)  # the checkpoint's weights, refitted at the start
    resumed.batches.resume(tmp_path, 3)
    staleness, _ = resumed.train(range(3, 7))
    assert staleness == [2, 2, 2, 2]  # as the uninterrupted run: min(step, k)
    assert [step for step, *_ in resumed.collections] == [5, 6]  # steps 3 and 4 came from the checkpoint


@pytest.mark.parametrize(("k", "kept", "staleness"), [(3, 2, [2, 2, 2, 3]), (1, 0, [0, 1, 1, 1]), (0, 0, None)])
def test_a_run_resumed_at_a_smaller_k_drops_what_would_train_too_old_and_says_so(tmp_path, capsys, k, kept,
                                                                                  staleness):
    checkpoint_after(2, 3, 7, tmp_path)  # batches for steps 3 and 4, from the weights of steps 1 and 2
    resumed = Run(k, max_steps=7, version=3)
    resumed.batches.resume(tmp_path, 3)
    out = capsys.readouterr().out
    if kept == 2:
        assert out == ""
    else:
        assert out == (f"[ppo] resumed at trainer.max_staleness={k}: 2 of the checkpoint's 2 batches in flight would "
                       "train too old; dropped (8 samples, whose prompts are not collected again)\n")
    if staleness is not None:
        assert resumed.batches.ahead.in_flight == kept
        assert resumed.train(range(3, 7))[0] == staleness
    else:
        assert resumed.batches.ahead is None and resumed.batches.ready is None  # k = 0 collects step 3's now


def test_usable_in_flight():
    assert usable_in_flight([1, 2], 3, 2) == 2
    assert usable_in_flight([0, 0], 1, 1) == 1  # early in a k = 2 run: step 2's batch is from the start's weights
    assert usable_in_flight([0, 0], 1, 0) == 0
    assert usable_in_flight([], 5, 0) == 0


def test_the_first_steps_waits_add_up():
    """Step 1 waits for its own batch and then, before the refit, for the wave ahead: both count."""
    run = Run(1, max_steps=3)
    clock = run.batches.clock
    run.batches.next(0)
    first = clock.timings["timing/train/waiting_for_generation"]
    run.batches.start_ahead(0)
    run.batches.wait_for_ahead()
    assert clock.timings["timing/train/waiting_for_generation"] > first >= 0.01  # each wave sleeps 0.01 s
    run.batches.close()
