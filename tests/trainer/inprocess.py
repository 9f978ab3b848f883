"""Short real PPO runs of ``experiments/tiny_cpu.py`` inside the test process, on one Ray runtime per test module.

The launcher's own path (``launch.py`` in a subprocess) is covered by ``test_functional_gates`` and the kill/resume
tests; here many short runs share the Ray start-up, and a test can inject a fault into a run with ``monkeypatch``
(a refit that never happens, logprobs at the wrong temperature) that no config option could express.  The config
goes through the launcher's :func:`ppo.launch.prepare.prepare`, so every option is validated as a launch would.

The runs share one warm start: a run whose overrides leave the warm start alone (see :func:`shares_the_warm_start`)
starts from the policy that ``FEW_STEPS``' 40-step warm start makes, exported once per test process, with no warm
start of its own.  That is the same starting point, to the bit (the warm start's batches, model and seeds are the
same; its optimizer state is reset before RL either way; the KL reference is the warm-started policy either way), at
a fraction of the cost: the warm start is most of a short run's time.
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
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


@pytest.fixture(scope="session")
def ray_runtime():
    """One local Ray runtime for the in-process runs of the whole session (each run ends its own actors; see
    ``PPOTrainer.close``): starting and stopping one per module cost about 6 s a module.  One already running in
    this process is used as it is (``init_local_ray`` is then a no-op)."""
    import ray

    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray()
    yield
    ray.shutdown()


WARM_START_INPUTS = ("task.", "model.", "seed=", "policy.parallel.", "policy.dtype", "policy.optimizer.",
                     "policy.num_threads", "policy.micro_batch_tokens", "policy.recompute", "policy.transformer_impl",
                     "trainer.warm_start")
"""Overrides that change what the warm start makes (or whether there is one)."""
TASK_FIDDLERS = ("mixed_sizes", "reversed_answers")

_shared_warm_start: list[Path] = []


def shares_the_warm_start(overrides: tuple[str, ...], fiddlers: tuple[str, ...]) -> bool:
    return not any(o.startswith(WARM_START_INPUTS) for o in overrides) and not set(fiddlers) & set(TASK_FIDDLERS)


def shared_warm_start() -> Path:
    """The policy after ``FEW_STEPS``' warm start, as an HF directory, made once per test process."""
    if not _shared_warm_start:
        from ppo.launch.prepare import Request, prepare
        from ppo.loop.trainer import PPOTrainer

        run_dir = Path(tempfile.mkdtemp(prefix="ppo-warm-start-"))
        atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
        trainer = PPOTrainer(prepare(Request(str(ROOT / "experiments" / "tiny_cpu.py"), FEW_STEPS)).experiment,
                             run_dir)
        try:
            trainer.setup()
            trainer.export_hf()
        finally:
            trainer.close()
        _shared_warm_start.append(run_dir / "export" / "policy")
    return _shared_warm_start[0]


def run_tiny(run_dir: Path, *overrides: str, fiddlers: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """Run the default with ``FEW_STEPS`` and ``overrides`` in this process; its metrics (``load_metrics``)."""
    from ppo.launch.prepare import Request, prepare
    from ppo.models.sources import HFCheckpoint

    experiment = prepare(Request(str(ROOT / "experiments" / "tiny_cpu.py"), [*FEW_STEPS, *overrides],
                                 list(fiddlers))).experiment
    if shares_the_warm_start(overrides, fiddlers):
        experiment = dataclasses.replace(experiment, model=HFCheckpoint(str(shared_warm_start())),
                                         trainer=dataclasses.replace(experiment.trainer, warm_start_steps=0))
    assert experiment.run(run_dir) == "completed"
    return load_metrics(run_dir)
