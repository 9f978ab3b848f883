"""The refit walks ``ppo.workers.memory.REFIT_STEPS``, the steps the memory plan sums: the critic and the policy's
training state leave the GPUs, the engines wake their weights only, the policy streams them, the policy's weights
leave, and only then do the KV caches wake.  Checked on a real run of the default (on CPU the moves themselves are
no-ops; the order of the calls the driver makes is the same as on GPUs), with the calls recorded as they pass."""

from __future__ import annotations

import pytest

from ppo.workers.generation import EnginePool
from ppo.workers.group import MegatronGroup
from ppo.workers.memory import REFIT_STEPS
from ppo.workers.refit import Refitter
from tests.trainer.inprocess import ray_runtime, run_tiny  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

EXPECTED = [
    "critic.offload(keep_weights=False)",
    "policy.offload(keep_weights=True)",
    "engines.wake_up(('weights',))",
    "refit.stream",
    "policy.offload(keep_weights=False)",
    "engines.wake_up(('kv_cache',))",
]


def test_every_refit_walks_the_memory_plans_steps(ray_runtime, monkeypatch, tmp_path):  # noqa: F811
    calls: list[str] = []
    offload, wake_up, stream = MegatronGroup.offload, EnginePool.wake_up, Refitter.__call__

    def recorded_offload(self, keep_weights=False):
        calls.append(f"{self.role}.offload(keep_weights={keep_weights})")
        return offload(self, keep_weights)

    def recorded_wake_up(self, tags=None):
        calls.append(f"engines.wake_up({tags})")
        return wake_up(self, tags)

    def recorded_stream(self):
        calls.append("refit.stream")
        return stream(self)

    monkeypatch.setattr(MegatronGroup, "offload", recorded_offload)
    monkeypatch.setattr(EnginePool, "wake_up", recorded_wake_up)
    monkeypatch.setattr(Refitter, "__call__", recorded_stream)
    metrics = run_tiny(tmp_path / "run", "trainer.max_steps=2")
    assert len(EXPECTED) == len(REFIT_STEPS)
    refits = [i for i, call in enumerate(calls) if call == "refit.stream"]
    assert len(refits) == 3, calls  # the first refit at start-up, then one a step
    for i in refits:
        assert calls[i - 3 : i + 3] == EXPECTED, calls
    assert min(metrics["train/driver_bytes"].values()) > 0
