"""Each nightly gate of the GPU recipes trips when its fault is injected into a real run, and holds without it.

The gates are the recipes' own expressions (``experiments/_base.FUNCTIONAL_GATES`` and ``dsr1_7b``'s KL gate),
evaluated by the nightly checker on the metrics of short real PPO runs of the tiny default:

    fault                                   gate that must trip
    the refit never reaches the engines     token_mult_prob_error (trainer and vLLM disagree)
    policy learning rate × 1000             clip fraction, unclamped ratio extremes, KL to the reference
    rewards 100× their intended scale       critic loss, critic gradient norm

(Logprobs at a wrong temperature trip the first gate too: 1.35 when measured once; one fault per gate runs here.)
A gate no fault trips would be a tautology (as ``0.79 < min(clamped ratio)`` was: the clamp guarantees it).
"""

from __future__ import annotations

import pytest

from experiments._base import FUNCTIONAL_GATES, KL_GATE
from ppo.metrics.checks import Status, run_checks

from .inprocess import ray_runtime, run_tiny  # noqa: F401 - the module's Ray runtime fixture

pytestmark = pytest.mark.slow

GATES = {
    "prob_error": FUNCTIONAL_GATES[0],
    "clip": FUNCTIONAL_GATES[1],
    "ratio": FUNCTIONAL_GATES[2],
    "critic_loss": FUNCTIONAL_GATES[3],
    "critic_grad": FUNCTIONAL_GATES[4],
    "kl": KL_GATE,
}
CALM = "policy.optimizer.lr=1e-5"
"""The healthy baseline takes a 7B recipe's small steps (the default's 1e-4 moves the 0.6M-parameter policy further
in one step than a nightly gate allows a 7B model to move); the learning-rate fault multiplies it by 1000."""
KL_RUN = ("policy.loss.kl_coef=0.001",)
"""The KL gate needs a reference model: these runs use dsr1_7b's KL loss."""
ONE_STEP = ("trainer.max_steps=1", "trainer.warm_start_steps=0")
"""A fault whose gate trips within the first step needs neither more steps nor a warm start."""


def verdicts(metrics) -> dict[str, Status]:
    report = run_checks(metrics, GATES.values())
    for result in report.results:
        print(f"{result.status.value:5} {result.check}  value={result.value}")
    return dict(zip(GATES, (r.status for r in report.results)))


def tripped(metrics) -> set[str]:
    return {name for name, status in verdicts(metrics).items() if status is Status.FAIL}


def test_a_healthy_run_passes_every_gate(ray_runtime, tmp_path):  # noqa: F811
    assert tripped(run_tiny(tmp_path / "clean", CALM, *KL_RUN, "trainer.max_steps=2",
                            "trainer.warm_start_steps=0")) == set()


@pytest.mark.parametrize("old_logprobs", [
    (),  # the default: logp_old from the engine, the gap measured on the policy's probe rows
    ("trainer.old_logprobs='policy'", "policy.loss.is_correction='tis'"),  # the GPU recipes': recomputed, corrected
], ids=["engine", "policy"])
def test_a_refit_that_never_reaches_the_engines_trips_the_logprob_gate(ray_runtime, tmp_path, monkeypatch,  # noqa: F811
                                                                       old_logprobs):
    from ppo.workers.refit import Refitter

    monkeypatch.setattr(Refitter, "__call__", lambda self: {"refit_seconds": 0.0, "refit_bytes": 0.0,
                                                            "refit_buckets": 0.0, "refit_driver_bytes": 0.0,
                                                            "refit_host_bytes": 0.0})
    # a short warm start moves the policy far from the initial weights the engines keep
    stale = run_tiny(tmp_path / "stale", CALM, "trainer.max_steps=1", "trainer.warm_start_steps=5", *old_logprobs)
    assert "prob_error" in tripped(stale)


def test_a_policy_learning_rate_1000x_too_high_trips_the_ratio_clip_and_kl_gates(ray_runtime, tmp_path):  # noqa: F811
    assert {"clip", "ratio", "kl"} <= tripped(run_tiny(tmp_path / "policy_lr", "policy.optimizer.lr=1e-2", *KL_RUN,
                                                         *ONE_STEP))


def test_rewards_100x_their_scale_trip_the_critic_gates(ray_runtime, tmp_path):  # noqa: F811
    wrong_scale = ("reward_shaping.scale=True", "reward_shaping.target_min=-100.0", "reward_shaping.target_max=100.0")
    assert {"critic_loss", "critic_grad"} <= tripped(run_tiny(tmp_path / "reward_scale", CALM, *wrong_scale,
                                                                    *ONE_STEP))
