"""``verify`` agrees with every GSM8K test reference, whichever way a model phrases the final answer.

Each of the 1319 shipped test rows is rewritten into the answer styles models actually produce; each must score 1.0
against the number after ``####``, and the same styles with the answer off by one must score 0.0.  All of this is
plain numeric comparison: the test fails if math-verify is ever consulted.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

import ppo.envs.math
from ppo.envs.math import verify

GSM8K_TEST = Path("/work/shared/data/gsm8k/test.jsonl")


def _rows() -> list[dict]:
    if not GSM8K_TEST.exists():
        pytest.skip(f"{GSM8K_TEST} not present")
    return [json.loads(line) for line in GSM8K_TEST.read_text().splitlines() if line.strip()]


def _styles(solution: str, answer: str) -> dict[str, str]:
    """The reference solution's working with the final line rewritten in each answer style."""
    working = solution.rsplit("####", 1)[0].rstrip()
    value = Decimal(answer.replace(",", ""))
    with_commas = f"{value:,}"
    return {
        "gsm8k": f"{working}\n#### {answer}",
        "boxed": f"{working}\nThe final answer is $\\boxed{{{answer}}}$.",
        "the answer is": f"{working}\nThe answer is {answer}.",
        "Answer: $ with commas": f"{working}\nAnswer: ${with_commas}",
        "answer tag": f"<think>{working}</think>\n<answer>{answer}</answer>",
        "distractor after marker": f"{working}\nThe answer is {answer}. Check: 3 + 4 = 7",
    }


@pytest.fixture
def no_symbolic(monkeypatch):
    """Records symbolic comparisons (``verify`` would swallow an exception raised here, so the test checks the list)."""
    calls: list[tuple] = []

    class Recorder:
        def equal(self, *args):
            calls.append(args)

    monkeypatch.setattr(ppo.envs.math, "_SYMBOLIC", Recorder())
    yield calls
    assert not calls, f"math-verify was consulted for plain-number answers, first: {calls[0]}"


def test_gsm8k_test_split_every_style(no_symbolic):
    rows = _rows()
    assert len(rows) == 1319
    wrong: list[tuple[int, str, str]] = []
    for i, row in enumerate(rows):
        truth = row["answer"].rsplit("####", 1)[1].strip()
        off_by_one = str(Decimal(truth.replace(",", "")) + 1)
        for style, response in _styles(row["answer"], truth).items():
            if verify(response, truth) != 1.0:
                wrong.append((i, style, "correct answer scored 0"))
        for style, response in _styles(row["answer"], off_by_one).items():
            if verify(response, truth) != 0.0:
                wrong.append((i, style, "wrong answer scored 1"))
    assert not wrong, f"{len(wrong)} disagreements, first: {wrong[:5]}"


def test_original_solution_text_verifies(no_symbolic):
    rows = _rows()
    assert all(verify(row["answer"], row["answer"].rsplit("####", 1)[1].strip()) == 1.0 for row in rows)
    assert all(verify(row["answer"], row["answer"]) == 1.0 for row in rows)
