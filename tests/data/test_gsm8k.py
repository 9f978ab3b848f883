from __future__ import annotations

import json
import re

import pytest

from ppo.data import DatasetError, load_gsm8k
from ppo.data.gsm8k import parse_final_answer


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_records_from_a_small_file(tmp_path):
    path = _write(
        tmp_path / "train.jsonl",
        [
            {"question": "How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
            {"question": "How much money?", "answer": "It costs $1,080.\n#### 1,080"},
            {"question": "Below zero?", "answer": "5 - 8 = -3\n####  -3 "},
        ],
    )
    records = load_gsm8k(path)
    assert [r.prompt for r in records] == ["How many?", "How much money?", "Below zero?"]
    assert [r.ground_truth for r in records] == ["7", "1080", "-3"]
    assert [r.id for r in records] == ["gsm8k/train/0", "gsm8k/train/1", "gsm8k/train/2"]
    assert records[1].metadata == {"source": "gsm8k", "solution": "It costs $1,080.\n#### 1,080"}
    assert load_gsm8k(path, limit=2) == records[:2]


def test_parse_final_answer_uses_the_last_marker():
    assert parse_final_answer("a #### b\n#### 12,345,678") == "12345678"
    with pytest.raises(ValueError, match="no '#### <answer>'"):
        parse_final_answer("the answer is 7")
    with pytest.raises(ValueError, match="empty"):
        parse_final_answer("#### ")


def test_missing_file_is_a_dataset_error_naming_the_path(tmp_path):
    path = tmp_path / "gsm8k" / "test.jsonl"
    with pytest.raises(DatasetError, match=re.escape(f"dataset file not found: {path}")):
        load_gsm8k(path)


def test_bad_rows_name_the_row(tmp_path):
    path = _write(tmp_path / "t.jsonl", [{"question": "q", "answer": "#### 1"}, {"question": "q", "answer": "7"}])
    with pytest.raises(DatasetError, match=r"t\.jsonl: row 1: no '#### <answer>' line"):
        load_gsm8k(path)
    path = _write(tmp_path / "u.jsonl", [{"question": "q", "answer": "#### 1"}, {"problem": "q", "answer": "#### 2"}])
    with pytest.raises(DatasetError, match=r"row 1 has no 'question' field \(fields: answer, problem\)"):
        load_gsm8k(path)


def test_the_shared_copy(gsm8k_dir):
    train = load_gsm8k(gsm8k_dir / "train.jsonl")
    test = load_gsm8k(gsm8k_dir / "test.jsonl")
    assert (len(train), len(test)) == (7473, 1319)
    assert train[0].ground_truth == "72" and train[0].prompt.startswith("Natalia sold clips")
    assert all(re.fullmatch(r"-?\d+", r.ground_truth) for r in train + test)
    assert sum("," in r.metadata["solution"].rpartition("####")[2] for r in train) > 0
    assert len({r.id for r in train}) == len(train)
