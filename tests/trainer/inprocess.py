"""Short real PPO runs of ``experiments/tiny_cpu.py`` inside the test process, on one Ray runtime per test module.

The launcher's own path (``launch.py`` in a subprocess) is covered by ``test_functional_gates`` and the kill/resume
tests; here many short runs share the Ray start-up, and a test can inject a fault into a run with ``monkeypatch``
(a refit that never happens, logprobs at the wrong temperature) that no config option could express.  The config
goes through the launcher's :func:`ppo.launch.prepare.prepare`, so every option is validated as a launch would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ppo.metrics import load_metrics

ROOT = Path(__file__).resolve().parents[2]

FEW_STEPS = [
    "trainer.max_steps=3",
    "trainer.prompts_per_step=32",
    "trainer.generations_per_prompt=4",
    "trainer.num_minibatches=2",
    # two passes (the default takes one): the second pass trains on a policy that has moved from the one that
    # sampled, which the clip, dual-clip and KL checks need within a few steps
    "trainer.ppo_epochs=2",
    "trainer.warm_start_steps=40",
    "trainer.val_period=100",
    "trainer.checkpoint_period=100",
    "task.val_size=16",
    "trainer.wandb_mode=disabled",
]
"""Three steps of the default on 32 prompts × 4 samples after a 40-step warm start; validation only at the end."""


@pytest.fixture(scope="module")
def ray_runtime():
    """One local Ray runtime for the module's runs (each run ends its own actors; see ``PPOTrainer.close``)."""
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray()
    yield
    ray.shutdown()


def run_tiny(run_dir: Path, *overrides: str, fiddlers: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """Run the default with ``FEW_STEPS`` and ``overrides`` in this process; its metrics (``load_metrics``)."""
    from ppo.launch.prepare import Request, prepare

    prepared = prepare(Request(str(ROOT / "experiments" / "tiny_cpu.py"), [*FEW_STEPS, *overrides],
                               list(fiddlers)))
    assert prepared.experiment.run(run_dir) == "completed"
    return load_metrics(run_dir)
