from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from ppo.data import DatasetError, load_aime2024, load_dapo_math
from tests.data.helpers import TABLE_SUFFIXES, write_table

INSTRUCTION = (
    "Solve the following math problem step by step. "
    "The last line of your response should be of the form Answer: $Answer"
)


def dapo_row(problem: str, answer: str, index: str) -> dict:
    return {
        "data_source": "math_dapo",
        "prompt": [{"role": "user", "content": f"{INSTRUCTION}\n\n{problem}\n\nPut your answer on its own line."}],
        "ability": "MATH",
        "reward_model": {"ground_truth": answer, "style": "rule-lean"},
        "extra_info": {"index": index},
    }


@pytest.mark.parametrize("suffix", TABLE_SUFFIXES)
def test_dapo_release_schema(tmp_path, suffix, caplog):
    rows = [dapo_row("What is 6*7?", "42", "a"), dapo_row("What is 2^10?", "1024", "b")]
    rows = rows + rows + [rows[0]]
    path = write_table(tmp_path / f"dapo{suffix}", rows)
    with caplog.at_level(logging.INFO, logger="ppo.data.dapo"):
        records = load_dapo_math(path)
    assert [r.ground_truth for r in records] == ["42", "1024"]
    assert records[0].prompt == rows[0]["prompt"][0]["content"]
    assert records[0].prompt.startswith(INSTRUCTION) and "What is 6*7?" in records[0].prompt
    assert records[0].metadata == {
        "source": "math_dapo",
        "ability": "MATH",
        "reward_style": "rule-lean",
        "extra_info": {"index": "a"},
    }
    assert [r.id for r in records] == ["dapo_math/0", "dapo_math/1"]
    assert "dropped 3 repeated rows of 5 (2 distinct problems)" in caplog.text

    everything = load_dapo_math(path, dedupe=False)
    assert len(everything) == 5 and everything[4] == replace(records[0], id="dapo_math/4")
    assert load_dapo_math(path, limit=1) == records[:1]


def test_dapo_variants_string_prompt_solution_column_and_json_strings(tmp_path):
    rows = [
        {"prompt": "What is 1+1?", "solution": "2", "data_source": "processed"},
        {"prompt": "What is 3+3?", "answer": " 6 "},
        {
            "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 5+5?"}],
            "reward_model": json.dumps({"ground_truth": "10", "style": "rule"}),
            "extra_info": json.dumps({"index": 7}),
        },
    ]
    records = load_dapo_math(write_table(tmp_path / "v.jsonl", rows))
    assert [(r.prompt, r.ground_truth) for r in records] == [
        ("What is 1+1?", "2"),
        ("What is 3+3?", "6"),
        ("What is 5+5?", "10"),
    ]
    assert records[0].metadata["source"] == "processed"
    assert records[2].metadata["extra_info"] == {"index": 7} and records[2].metadata["reward_style"] == "rule"
    assert records[2].metadata["messages"][0] == {"role": "system", "content": "Be brief."}


def test_dapo_errors_name_the_row(tmp_path):
    rows = [dapo_row("q", "1", "a"), {"prompt": "q2", "reward_model": {"style": "x"}}]
    path = write_table(tmp_path / "e.jsonl", rows)
    with pytest.raises(DatasetError, match=r"e\.jsonl: row 1: no answer"):
        load_dapo_math(path)
    path = write_table(tmp_path / "f.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(DatasetError, match=r"row 0 has no 'prompt' field \(fields: answer, question\)"):
        load_dapo_math(path)
    path = write_table(tmp_path / "g.jsonl", [{"prompt": [{"role": "assistant", "content": "x"}], "answer": "1"}])
    with pytest.raises(DatasetError, match="user message"):
        load_dapo_math(path)
    with pytest.raises(DatasetError, match="dataset file not found"):
        load_dapo_math(tmp_path / "missing.parquet")


@pytest.mark.parametrize("suffix", TABLE_SUFFIXES)
def test_aime_maxwell_jia_layout(tmp_path, suffix):
    rows = [
        {"ID": "2024-I-1", "Problem": "Find x. ", "Solution": "x is 204.", "Answer": 204},
        {"ID": "2024-II-15", "Problem": "Find y.", "Solution": "y is 33.", "Answer": 33},
    ]
    records = load_aime2024(write_table(tmp_path / f"aime{suffix}", rows))
    assert [(r.id, r.prompt, r.ground_truth) for r in records] == [
        ("aime2024/2024-I-1", "Find x.", "204"),
        ("aime2024/2024-II-15", "Find y.", "33"),
    ]
    assert records[1].metadata == {"source": "aime2024", "problem_id": "2024-II-15", "solution": "y is 33."}


def test_aime_lowercase_layout_normalises_padded_answers(tmp_path):
    rows = [{"id": 60, "problem": "Find z.", "solution": "...", "answer": "033", "url": "u", "year": 2024}]
    (record,) = load_aime2024(write_table(tmp_path / "h4.jsonl", rows))
    assert (record.id, record.ground_truth) == ("aime2024/60", "33")


def test_aime_dapo_export_folds_repeats(tmp_path):
    rows = [dapo_row("Find x.", "033", "0"), dapo_row("Find y.", "7", "1")] * 3
    records = load_aime2024(write_table(tmp_path / "aime_dapo.jsonl", rows))
    assert [r.ground_truth for r in records] == ["33", "7"]
    assert records[0].prompt.startswith(INSTRUCTION)
    assert len(load_aime2024(write_table(tmp_path / "aime_dapo.jsonl", rows), dedupe=False)) == 6


def test_aime_unknown_layout_says_what_it_expects(tmp_path):
    path = write_table(tmp_path / "x.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(DatasetError, match=r"row 0 has no 'problem' field .*ID/Problem/Solution/Answer"):
        load_aime2024(path)
