"""Held-out validation's arithmetic (``ppo.rollout.validation``): avg@K is the mean over all K·N answers, pass@k the
unbiased estimate per problem, and every answer becomes a row.  The engine's side is exercised in real runs
(``tests/trainer/test_feature_matrix.py``); here ``generate`` answers from a script, so the expected numbers are
exact."""

import pytest
import torch

from ppo.data.records import Record
from ppo.rollout.settings import Sample, SamplingConfig
from ppo.rollout.validation import pass_ks, validate


class ExactMatch:
    """Scores like the verifier on plain answers: 1.0 when the text equals the truth."""

    def score(self, responses, truths, **_):
        return torch.tensor([float(r == t) for r, t in zip(responses, truths)]), {}


def scripted(greedy: list[str], sampled: list[list[str]]):
    def generate(prompts, sampling, seed):
        texts = [[g] for g in greedy] if sampling.temperature == 0 else sampled
        assert len(texts) == len(prompts) and all(len(t) == sampling.n for t in texts)
        return [[Sample(token_ids=[0] * len(t), logprobs=[], finish_reason="stop", text=t) for t in group]
                for group in texts]
    return generate


def test_pass_ks_are_powers_of_two_up_to_k():
    assert pass_ks(1) == [1]
    assert pass_ks(4) == [1, 2, 4]
    assert pass_ks(32) == [1, 2, 4, 8, 16, 32]
    assert pass_ks(6) == [1, 2, 4, 6]


def test_avg_at_k_and_pass_at_k_over_the_problems():
    records = [Record(prompt="1+1", ground_truth="2", id="a"), Record(prompt="2+2", ground_truth="4", id="b")]
    generate = scripted(greedy=["2", "5"], sampled=[["2", "3", "2", "2"], ["1", "1", "1", "4"]])
    metrics, rows = validate(generate, ExactMatch(), records, [[1], [2]], SamplingConfig(), samples=4)
    assert metrics["validation/accuracy"] == 0.5
    assert metrics["validation/avg@4"] == 4 / 8
    # pass@k = 1 - C(n-c, k)/C(n, k): problem a has c=3 of 4, problem b c=1 of 4
    assert metrics["validation/pass@1"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert metrics["validation/pass@2"] == pytest.approx((1 + (1 - 3 / 6)) / 2)
    assert metrics["validation/pass@4"] == 1.0
    assert [(r["record_id"], r["mode"], r["response"], r["reward"]) for r in rows] == [
        ("a", "greedy", "2", 1.0), ("b", "greedy", "5", 0.0),
        ("a", "sampled", "2", 1.0), ("a", "sampled", "3", 0.0), ("a", "sampled", "2", 1.0), ("a", "sampled", "2", 1.0),
        ("b", "sampled", "1", 0.0), ("b", "sampled", "1", 0.0), ("b", "sampled", "1", 0.0), ("b", "sampled", "4", 1.0)]
    assert rows[0]["prompt"] == "1+1" and rows[0]["ground_truth"] == "2"


def test_greedy_only_without_samples():
    records = [Record(prompt="1+1", ground_truth="2", id="a")]
    metrics, rows = validate(scripted(["2"], []), ExactMatch(), records, [[1]], SamplingConfig())
    assert set(metrics) == {"validation/accuracy", "validation/avg_length"}
    assert len(rows) == 1
