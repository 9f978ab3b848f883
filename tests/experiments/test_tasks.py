"""Task components: DAPO-Math with AIME 2024 validation, GSM8K with a chat template, mixed-size arithmetic."""

import json

import pytest

from ppo.data.prompts import DAPO_MATH_TEMPLATE
from ppo.data.tasks import DAPOMathTaskSpec, GSM8KTaskSpec, MixedArithmeticTaskSpec


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def dapo_row(problem: str, answer: str) -> dict:
    message = {"role": "user", "content": DAPO_MATH_TEMPLATE.format(prompt=problem)}
    return {"data_source": "math_dapo", "prompt": [message], "ability": "MATH",
            "reward_model": {"ground_truth": answer, "style": "rule-lean"}}


def test_dapo_math_asks_validation_problems_the_way_training_did(tmp_path):
    train = write_jsonl(tmp_path / "dapo.jsonl", [dapo_row("1+1?", "2"), dapo_row("1+1?", "2"), dapo_row("2+3?", "5")])
    plain = write_jsonl(tmp_path / "aime.jsonl", [{"ID": "2024-I-1", "Problem": "Find x.", "Answer": "033"},
                                                  {"ID": "2024-I-2", "Problem": "Find y.", "Answer": 7}])
    exported = write_jsonl(tmp_path / "aime_dapo.jsonl", [dapo_row("Find x.", "33")])
    task = DAPOMathTaskSpec(train_path=train, val_path=plain, val_size=1)
    task.check()
    assert task.missing_paths() == []
    assert [r.ground_truth for r in task.train_records()] == ["2", "5"]  # repeats folded
    (val,) = task.val_records()
    assert val.prompt == DAPO_MATH_TEMPLATE.format(prompt="Find x.") and val.ground_truth == "33"
    already_wrapped = DAPOMathTaskSpec(train_path=train, val_path=exported).val_records()
    assert [r.prompt for r in already_wrapped] == [DAPO_MATH_TEMPLATE.format(prompt="Find x.")]
    assert task.template().use_chat_template and task.template().template == "{prompt}"


def test_missing_files_are_listed_not_raised_by_validate():
    task = DAPOMathTaskSpec(train_path="/nowhere/dapo.parquet", val_path="/nowhere/aime.parquet")
    task.check()
    assert task.missing_paths() == ["DAPO-Math file not found: /nowhere/dapo.parquet",
                                    "AIME 2024 file not found: /nowhere/aime.parquet"]
    assert GSM8KTaskSpec(train_path="/nowhere/train.jsonl", test_path="/nowhere/test.jsonl").missing_paths() == [
        "GSM8K file not found: /nowhere/train.jsonl", "GSM8K file not found: /nowhere/test.jsonl"]


def test_gsm8k_can_use_the_chat_template():
    task = GSM8KTaskSpec(train_path="t.jsonl", test_path="v.jsonl", template_text="{prompt} Think.",
                         use_chat_template=True)
    assert task.template().use_chat_template and task.template().template == "{prompt} Think."
    assert not GSM8KTaskSpec().template().use_chat_template


def test_a_mixed_arithmetic_task_keeps_its_shares_and_never_trains_on_a_heldout_problem():
    from collections import Counter

    task = MixedArithmeticTaskSpec(digits=(1, 2), weights=(3, 1), train_size=400, val_size=41)
    task.check()
    train, heldout = task.train_records(), task.val_records()
    assert Counter(r.metadata["group"] for r in train) == {"1-digit": 300, "2-digit": 100}
    assert Counter(r.metadata["group"] for r in heldout) == {"1-digit": 31, "2-digit": 10}
    assert {len(r.prompt) for r in train} == {4, 6}  # "3+4=", "12+34=": the size shows in the prompt
    assert not {r.prompt for r in train} & {r.prompt for r in heldout}
    one_digit = {r.prompt for r in train if r.metadata["group"] == "1-digit"}
    assert 80 < len(one_digit) < 100  # all of the split's one-digit sums, repeated to fill the share
    assert all(str(sum(map(int, r.prompt[:-1].split("+")))) == r.ground_truth for r in train + heldout)
    assert train == task.train_records()  # deterministic


@pytest.mark.parametrize("settings, message", [
    ({"digits": (1, 2), "weights": (1.0,)}, "must be non-empty and of the same length"),
    ({"digits": (2, 2), "weights": (1, 1)}, "task.digits must be distinct"),
    ({"digits": (1, 2), "weights": (1, 0)}, "task.weights must be > 0"),
    ({"digits": (0,), "weights": (1,)}, "digits must be >= 1"),
])
def test_a_mixed_arithmetic_task_refuses_settings_it_cannot_mix(settings, message):
    with pytest.raises(ValueError, match=message):
        MixedArithmeticTaskSpec(**settings).check()


def test_the_reversed_answers_fiddler_asks_for_sums_written_units_digit_first():
    from ppo.launch.prepare import Request, prepare

    experiment = prepare(Request("experiments/tiny_cpu.py", [], ["reversed_answers"], dry_run=True)).experiment
    records = experiment.task.train_records()
    assert len(records) == 8000
    for r in records[:200]:
        left, right = r.prompt[:-1].split("+")
        assert r.ground_truth == str(int(left) + int(right))[::-1]
    assert any(r.ground_truth != r.ground_truth[::-1] for r in records[:200])
    default = prepare(Request("experiments/tiny_cpu.py", [], [], dry_run=True)).experiment
    assert all(r.ground_truth == str(sum(map(int, r.prompt[:-1].split("+")))) for r in default.task.val_records())
