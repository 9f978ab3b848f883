from __future__ import annotations

import json

import pytest

from ppo.data import DatasetError, read_rows
from tests.data.helpers import TABLE_SUFFIXES, write_table


def test_missing_file_is_one_line_naming_the_path(tmp_path):
    path = tmp_path / "nope" / "train.jsonl"
    with pytest.raises(DatasetError) as info:
        read_rows(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert isinstance(info.value, ValueError)


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2\n')
    with pytest.raises(DatasetError, match=r"x\.jsonl:3: not valid JSON"):
        read_rows(path)


def test_jsonl_skips_blank_lines_and_rejects_non_objects(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert read_rows(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(DatasetError, match=r"x\.jsonl:2: expected a JSON object, got list"):
        read_rows(path)


def test_json_list_and_unsupported_suffix(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"a": 1}, {"a": [1, 2]}]))
    assert read_rows(path) == [{"a": 1}, {"a": [1, 2]}]
    path.write_text(json.dumps({"a": 1}))
    with pytest.raises(DatasetError, match="list of objects"):
        read_rows(path)
    other = tmp_path / "x.csv"
    other.write_text("a\n1\n")
    with pytest.raises(DatasetError, match=r"unsupported dataset format '\.csv'"):
        read_rows(other)


@pytest.mark.parametrize("suffix", TABLE_SUFFIXES)
def test_nested_columns_come_back_as_plain_python(tmp_path, suffix):
    rows = [
        {"prompt": [{"role": "user", "content": "1+1?"}], "reward_model": {"ground_truth": "2", "style": "r"}, "n": 3},
        {"prompt": [{"role": "user", "content": "2+2?"}], "reward_model": {"ground_truth": "4", "style": "r"}, "n": 4},
    ]
    back = read_rows(write_table(tmp_path / f"t{suffix}", rows))
    assert back == rows
    assert type(back[0]["prompt"]) is list and type(back[0]["n"]) is int


def test_parquet_without_an_engine_says_what_to_install(tmp_path):
    for engine in ("pyarrow", "fastparquet"):
        try:
            __import__(engine)
        except ImportError:
            continue
        pytest.skip(f"{engine} is installed")
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(DatasetError, match="pyarrow"):
        read_rows(path)
