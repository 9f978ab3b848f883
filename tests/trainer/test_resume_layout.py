"""A checkpoint saved at tensor parallel 2 resumes at tensor parallel 1: the launcher says it reshards, and the next
step's metrics are those of the run that went on at TP 2.

Both runs start from the shared warm start (:mod:`tests.trainer.inprocess`) with the policy at TP 2 for the first,
checkpointing every step; the second resumes its step 1 (``trainer.resume=DIR``) at TP 1.  Megatron's distributed
checkpoint stores global tensors, so the resumed policy holds the same weights to the bit: step 2 samples the same
answers (the engine is refitted with those weights) and trains on them.  Only the order of the tensor-parallel
reductions differs (a sum over two halves against one sum), so the metrics agree to float32 rounding, not bitwise.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from ppo.metrics import load_metrics

from .inprocess import FEW_STEPS, ROOT, ray_runtime, shared_warm_start  # noqa: F401 - the module's Ray runtime

pytestmark = pytest.mark.slow

TWO_STEPS = ["trainer.max_steps=2", "trainer.checkpoint_period=1", "trainer.keep_checkpoints=2"]


def run_from_the_warm_start(run_dir, *overrides: str):
    """The default with ``FEW_STEPS`` and ``overrides`` from the shared warm start; ``(metrics, prepared)``."""
    from ppo.launch.prepare import Request, prepare
    from ppo.models.sources import HFCheckpoint

    prepared = prepare(Request(str(ROOT / "experiments" / "tiny_cpu.py"), [*FEW_STEPS, *TWO_STEPS, *overrides]))
    experiment = dataclasses.replace(prepared.experiment, model=HFCheckpoint(str(shared_warm_start())),
                                     trainer=dataclasses.replace(prepared.experiment.trainer, warm_start_steps=0))
    assert experiment.run(run_dir) == "completed"
    return load_metrics(run_dir), prepared


def test_a_tp2_checkpoint_resumes_at_tp1_with_the_same_next_step(ray_runtime, tmp_path):  # noqa: F811
    tp2, _ = run_from_the_warm_start(tmp_path / "tp2", "policy.parallel.tensor=2")
    step_1 = tmp_path / "tp2" / "checkpoints" / "step_000001"
    resumed, prepared = run_from_the_warm_start(tmp_path / "tp1", "policy.parallel.tensor=1",
                                                f"trainer.resume={step_1}")
    assert (f"trainer.resume: {step_1}/policy matches the model (saved at tensor parallel 2, loaded at 1: Megatron "
            "reshards it on load)") in prepared.model_notes
    layout_dependent = ("bytes", "buckets")  # how the refit moves the weights, not what the step computes
    trained = {name: series["2"] for name, series in tp2.items()
               if name.startswith("train/") and "2" in series and not any(w in name for w in layout_dependent)}
    assert {"train/reward", "train/critic/explained_var", "train/token_mult_prob_error"} <= set(trained)
    assert "1" not in resumed["train/reward"]  # the resumed run trained step 2 only
    for name, expected in trained.items():
        got = resumed[name]["2"]
        assert math.isclose(got, expected, rel_tol=1e-3, abs_tol=1e-5), (name, got, expected)
