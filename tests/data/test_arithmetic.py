from __future__ import annotations

import re

import pytest

from ppo.data import ArithmeticTask, DatasetError
from ppo.data.arithmetic import ALPHABET


def reference_value(prompt: str) -> int:
    """Signed terms summed: an evaluation of ``+``/``-`` chains independent of the task's own left fold."""
    assert prompt.endswith("=")
    return sum(int(term) for term in re.findall(r"[+-]?\d+", prompt[:-1]))


TASKS = [
    ArithmeticTask(),
    ArithmeticTask(digits=1, num_operands=3, operations="+-"),
    ArithmeticTask(digits=3, num_operands=3, operations="+-", allow_negative=False),
    ArithmeticTask(digits=2, operations="-", pad_operands=False, heldout_fraction=0.25),
    ArithmeticTask(digits=2, operations="+-", reverse_answer=True),
]


def written_value(task: ArithmeticTask, ground_truth: str) -> int:
    """The integer an answer stands for, read back from the way the task writes it."""
    if not task.reverse_answer:
        return int(ground_truth)
    sign, digits = (-1, ground_truth[1:]) if ground_truth.startswith("-") else (1, ground_truth)
    assert digits[0] != "0", f"a reversed answer that begins with 0: {ground_truth}"
    return sign * int(digits[::-1])


@pytest.mark.parametrize("task", TASKS, ids=str)
def test_problems_are_well_formed_and_answers_correct(task):
    for split, size in (("train", 300), ("heldout", 60)):
        records = task.generate(split, size, seed=3)
        assert len(records) == size
        assert len({r.prompt for r in records}) == size
        for r in records:
            assert set(r.prompt) <= set(ALPHABET) and set(r.ground_truth) <= set(ALPHABET)
            assert written_value(task, r.ground_truth) == reference_value(r.prompt)
            assert re.fullmatch(r"-?[1-9]\d*|0", r.ground_truth), "no leading zeros, whichever way it is written"
            assert r.metadata["split"] == split
            operands = re.findall(r"\d+", r.prompt)
            assert len(operands) == task.num_operands
            if task.pad_operands:
                assert all(len(o) == task.digits for o in operands)
            else:
                assert all(o == str(int(o)) for o in operands)
            assert set(re.findall(r"[+-]", r.prompt)) <= set(task.operations)
            if not task.allow_negative:
                assert int(r.ground_truth) >= 0


def test_the_probe_format():
    task = ArithmeticTask()
    assert task.text((5, 7), ("+",)) == "05+07="
    records = task.generate("train", 5000, seed=0)
    assert all(re.fullmatch(r"\d\d\+\d\d=", r.prompt) for r in records)
    assert max(int(r.ground_truth) for r in records) <= 198


def test_same_seed_same_problems_other_seed_other_problems():
    task = ArithmeticTask(digits=3)
    assert task.generate("train", 500, seed=1) == task.generate("train", 500, seed=1)
    assert task.generate("train", 500, seed=1) != task.generate("train", 500, seed=2)
    small = ArithmeticTask(digits=1)
    assert small.generate("train", 50, seed=1) == small.generate("train", 50, seed=1)
    assert small.generate("train", 50, seed=1) != small.generate("train", 50, seed=2)


@pytest.mark.parametrize("task", TASKS, ids=str)
def test_heldout_is_disjoint_from_train_whatever_the_seeds_and_sizes(task):
    train = {r.prompt for seed in (0, 1, 2) for r in task.generate("train", 400, seed=seed)}
    heldout = {r.prompt for seed in (0, 7) for size in (30, 90) for r in task.generate("heldout", size, seed=seed)}
    assert train.isdisjoint(heldout)


def test_splits_partition_a_small_space():
    task = ArithmeticTask(digits=1, heldout_fraction=0.2)
    assert task.space_size == 100
    train = task.all_problems("train")
    heldout = task.all_problems("heldout")
    assert len(train) + len(heldout) == 100
    assert {r.prompt for r in train}.isdisjoint(r.prompt for r in heldout)
    assert 8 <= len(heldout) <= 35
    assert sorted(r.prompt for r in task.generate("heldout", len(heldout))) == sorted(r.prompt for r in heldout)
    with pytest.raises(DatasetError, match=f"only {len(heldout)} heldout problems; asked for {len(heldout) + 1}"):
        task.generate("heldout", len(heldout) + 1)


def test_heldout_fraction_is_roughly_kept():
    task = ArithmeticTask()
    heldout = len(task.all_problems("heldout"))
    assert 850 <= heldout <= 1150


def test_subtraction_can_go_negative_unless_forbidden():
    signed = ArithmeticTask(operations="-").generate("train", 500)
    assert any(r.ground_truth.startswith("-") for r in signed)
    unsigned = ArithmeticTask(operations="-", allow_negative=False).generate("train", 500)
    assert all(not r.ground_truth.startswith("-") for r in unsigned)


def test_reversed_answers_are_the_digits_least_significant_first():
    task = ArithmeticTask(reverse_answer=True, operations="+-")
    assert [task.answer_text(n) for n in (51, 7, 123, -45, -8)] == ["15", "7", "321", "-54", "-8"]
    records = task.generate("train", 2000, seed=0)
    assert {r.prompt for r in records}.isdisjoint({"12+38=", "50+50="}), "results ending in 0 are left out"
    assert not any(reference_value(r.prompt) % 10 == 0 for r in records)
    assert any(len(r.ground_truth) == 3 for r in records) and any(r.ground_truth.startswith("-") for r in records)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"digits": 0}, "digits"),
        ({"num_operands": 1}, "num_operands"),
        ({"operations": "*"}, "operations"),
        ({"operations": "++"}, "operations"),
        ({"heldout_fraction": 0.0}, "heldout_fraction"),
    ],
)
def test_invalid_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ArithmeticTask(**kwargs)


def test_invalid_requests():
    with pytest.raises(ValueError, match="split"):
        ArithmeticTask().generate("test", 10)
    with pytest.raises(ValueError, match="size"):
        ArithmeticTask().generate("train", 0)
