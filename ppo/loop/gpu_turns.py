"""Who holds the GPUs that the Megatron ranks and the engines share: ``train`` (the engines asleep, weights and KV
cache freed; the ranks on their devices) or ``generate`` (the ranks offloaded to the host, the engines awake), and the
refit that hands them from the first to the second.  On CPU ranks every hand-over is a no-op for the memory, but the
calls are the same.

(A step's *phase*, :mod:`ppo.loop.clock`, is a different thing: the part of the step that is timed.)"""

from __future__ import annotations

from ppo.rollout.generation import EnginePool
from ppo.workers.group import PolicyGroup, ValueGroup
from ppo.workers.memory import REFIT_STEPS
from ppo.workers.refit import Refitter

HOLDERS = ("train", "generate")


class GpuTurns:
    """The GPUs' current :attr:`holder` and the hand-overs between the groups and the engines."""

    holder: str = "train"
    """Who has the GPUs now: ``train`` or ``generate`` (:data:`HOLDERS`)."""

    def __init__(self, policy: PolicyGroup, critic: ValueGroup | None, engines: EnginePool, *, holder: str):
        if holder not in HOLDERS:
            raise ValueError(f"the GPUs' holder is one of {HOLDERS}, got {holder!r}")
        self.policy, self.critic, self.engines = policy, critic, engines
        self.holder = holder

    @property
    def groups(self) -> list:
        return [g for g in (self.policy, self.critic) if g is not None]

    def hand_to(self, holder: str) -> None:
        """``train``: the engines sleep and the groups come back; ``generate``: the groups offload and the engines
        wake.  Nothing when ``holder`` has them already."""
        if holder == self.holder:
            return
        if holder == "train":
            self.engines.sleep()
            for group in self.groups:
                group.onload()
        else:
            for group in self.groups:
                group.offload()
            self.engines.wake_up()
        self.holder = holder

    def refit(self, refitter: Refitter) -> dict[str, float]:
        """Stream the policy's weights to the engines (policy ranks to engines, never through the driver) and hand
        the GPUs to generation, walking :data:`ppo.workers.memory.REFIT_STEPS` (the memory plan sums the bytes of
        the same steps): the critic and the policy's training state leave the GPUs, the engines wake their weights
        only, receive, the policy's weights leave, and only then do the KV caches wake.  Returns the refit's stats
        (:class:`ppo.workers.refit.Refitter`)."""
        if self.holder != "train":  # the groups already hold nothing on the GPUs
            return refitter()
        stats = {}
        for target, action in REFIT_STEPS:
            stats = self.refit_step(target, action, refitter) or stats
        self.holder = "generate"
        return stats

    def refit_step(self, target: str, action: str, refitter: Refitter) -> dict[str, float] | None:
        """One of :data:`ppo.workers.memory.REFIT_STEPS` (the stream's stats from ``refit.stream``)."""
        if target == "critic":
            if self.critic is not None:
                self.critic.offload()
        elif (target, action) == ("policy", "offload_state"):
            self.policy.offload(keep_weights=True)
        elif (target, action) == ("policy", "offload"):
            self.policy.offload()
        elif (target, action) == ("engines", "wake_weights"):
            self.engines.wake_up(("weights",))
        elif (target, action) == ("engines", "wake_kv_cache"):
            self.engines.wake_up(("kv_cache",))
        elif (target, action) == ("refit", "stream"):
            return refitter()
        else:
            raise ValueError(f"unknown refit step {target}.{action}")
        return None


class OwnDevices(GpuTurns):
    """The engines on devices of their own (``trainer.max_staleness`` >= 1: they generate while the groups train):
    nothing is handed over, and a refit only streams the weights."""

    def hand_to(self, holder: str) -> None:
        return None

    def refit(self, refitter: Refitter) -> dict[str, float]:
        return refitter()
