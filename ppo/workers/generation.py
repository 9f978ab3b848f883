"""The generation worker: a Ray actor that owns a vLLM engine in its own process."""

from __future__ import annotations

import ray

from ppo.rollout.engine import SamplingConfig, VLLMGeneration


class GenerationWorker:
    """Builds the engine inside the actor's process (never in the driver) and serves generate / refit / sleep."""

    def __init__(self, cfg: VLLMGeneration):
        self.engine = cfg.build()
        self.tokenizer = self.engine.tokenizer

    def generate(self, prompts: list[list[int]], sampling: SamplingConfig | None = None, seed: int | None = None):
        return self.engine.generate(prompts, sampling, seed)

    def refit(self, weights: dict) -> dict[str, float]:
        return self.engine.refit(weights.items())

    def sleep(self) -> None:
        self.engine.sleep()

    def wake_up(self) -> None:
        self.engine.wake_up()

    def ready(self) -> bool:
        return True


def spawn_generation_worker(cfg: VLLMGeneration, **options):
    """Start a ``GenerationWorker`` actor (``options``: Ray actor options, default one CPU) and wait until its engine
    is up (errors surface here, not later)."""
    options = {"num_cpus": 1, "num_gpus": 0, **options}
    actor = ray.remote(GenerationWorker).options(**options).remote(cfg)
    ray.get(actor.ready.remote())
    return actor
