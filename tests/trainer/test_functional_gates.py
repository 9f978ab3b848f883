"""A few PPO steps of the embedded default, launched as a user launches it: logprob agreement, critic warmup, the
named metrics, checkpoints, and their export (``launch.py export``)."""

from __future__ import annotations

import json

import pytest

from .conftest import trained_metrics

pytestmark = pytest.mark.slow


def test_trainer_and_vllm_agree_on_logprobs(reference_run):
    """The default's own nightly gate (the GPU recipes' gates, which the default's large steps would trip, are
    proven against faults in test_gates_can_fail.py)."""
    m = trained_metrics(reference_run)
    assert max(m["train/token_mult_prob_error"].values()) < 1.05


def test_critic_warmup_leaves_the_policy_alone(reference_run):
    m = trained_metrics(reference_run)
    assert m["train/policy_updated"] == {"1": 0.0, "2": 0.0, "3": 1.0, "4": 1.0, "5": 1.0}
    assert set(m["train/policy_loss"]) == {"3", "4", "5"}, "the actor must not step during critic warmup"
    assert set(m["train/critic/loss"]) == {"1", "2", "3", "4", "5"}, "the critic trains from the first step"
    timings = json.loads("[" + ",".join((reference_run / "metrics.jsonl").read_text().splitlines()) + "]")
    refits = {row["step"] for row in timings if "timing/train/refit" in row}
    assert refits == {3, 4, 5}, "generation keeps the initial weights until the actor has trained"


def test_every_step_logs_the_named_metrics(reference_run):
    m = trained_metrics(reference_run)
    steps = {"1", "2", "3", "4", "5"}
    for name in ("train/reward", "train/critic/explained_var", "train/critic/loss", "train/advantages/mean",
                 "train/mean_gen_tokens_per_sample", "train/env/accuracy"):
        assert set(m[name]) == steps, name
    assert set(m["validation/accuracy"]) == {"0", "2", "4", "5"}
    checkpoints = sorted(p.name for p in (reference_run / "checkpoints").iterdir())
    assert checkpoints == [f"step_{s:06d}" for s in range(1, 6)]


def test_a_checkpoint_step_exports_as_the_trainer_exports_its_end(reference_run, tmp_path):
    """``launch.py export`` on the run: the latest step's policy and critic are bit for bit what the trainer exported
    at the end through its workers (``trainer.export_hf``), config included; the policy of step 1 is that of step 2
    (critic warmup) and not the trained one; the folder loads on its own."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ppo.models.convert import load_hf_state_dict
    from tests.launch.conftest import launch_script

    def export(*args: str):
        out = tmp_path / ("-".join(args) or "latest")
        assert launch_script().main(["export", str(reference_run), *args, "--out", str(out)]) == 0
        return out

    def same(a: dict, b: dict) -> bool:
        return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)

    for ours, role in ((export(), "policy"), (export("--critic"), "critic")):
        theirs = reference_run / "export" / role
        assert same(load_hf_state_dict(ours), load_hf_state_dict(theirs)), role
        assert json.loads((ours / "config.json").read_text()) == json.loads((theirs / "config.json").read_text())
    first, second = load_hf_state_dict(export("--step", "1")), load_hf_state_dict(export("--step", "2"))
    assert same(first, second) and not same(first, load_hf_state_dict(tmp_path / "latest"))
    AutoTokenizer.from_pretrained(tmp_path / "latest")
    AutoModelForCausalLM.from_pretrained(tmp_path / "latest")


def test_evaluating_a_checkpoint_step_reproduces_the_runs_own_validation(reference_run):
    """``launch.py eval`` at step 4 (a validated step): the same greedy answers as the run's validation there (the
    same accuracy and mean length), plus avg@K and pass@k from K sampled answers, a per-problem table and every
    answer, in ``eval/step_4``.  In a process of its own: vLLM in-process takes over torch's threads."""
    import csv
    import subprocess
    import sys

    from ppo.metrics import load_metrics
    from tests.trainer.conftest import ROOT

    done = subprocess.run([sys.executable, str(ROOT / "launch.py"), "eval", str(reference_run), "--step", "4",
                           "--samples", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = reference_run / "eval" / "step_4"
    result = json.loads((out / "metrics.json").read_text())
    logged = load_metrics(reference_run)
    assert result["eval/accuracy"] == logged["validation/accuracy"]["4"]
    assert result["eval/avg_length"] == logged["validation/avg_length"]["4"]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    sampled = [r["reward"] for r in rows if r["mode"] == "sampled"]
    assert len(sampled) == 2 * 32 and result["eval/avg@2"] == sum(sampled) / len(sampled)
    assert 0 <= result["eval/pass@1"] <= result["eval/pass@2"] <= 1
    problems = list(csv.DictReader((out / "problems.csv").open()))
    assert len(problems) == 32 and {"record_id", "greedy", "avg@2", "pass@2"} <= set(problems[0])
    assert "at step 4, 32 problems, 2 samples each" in done.stdout
