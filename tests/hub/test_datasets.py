"""Datasets by name: fetched from the HF cache (offline) through ``datasets`` into PPO_DATA_ROOT, read by the
loaders from there or from local files, and checked for their columns."""

import json

import pytest

from ppo.data import load_aime2024, load_dapo_math, load_gsm8k
from ppo.data.dapo import check_dapo_math_columns
from ppo.data.gsm8k import check_gsm8k_columns
from ppo.data.hub import fetch_dataset, parse_dataset_id
from ppo.data.records import DatasetError
from ppo.hub import HubError
from tests.hub.cache import DAPO_ROWS, GSM8K_TEST, GSM8K_TRAIN, parquet_bytes
from tests.hub.conftest import cache_aime, cache_dapo_math, cache_gsm8k


def test_a_split_is_fetched_from_the_hf_cache_into_the_data_root_and_loaded_by_name(caches):
    snapshot = cache_gsm8k(caches.hub)
    file = fetch_dataset(parse_dataset_id("openai/gsm8k:main:train"))
    assert file == caches.data / "openai/gsm8k/main/train.parquet"
    source = json.loads((file.parent / "train.SOURCE.json").read_text())
    assert source == {"repo_id": "openai/gsm8k", "revision": None, "commit": snapshot.name, "config": "main",
                      "split": "train", "rows": 2}
    assert not [p for p in file.parent.iterdir() if p.name.startswith(".fetch-")], "the scratch arrow cache is gone"
    records = load_gsm8k("openai/gsm8k:main:train")
    assert [(r.prompt, r.ground_truth, r.id) for r in records] == [
        (GSM8K_TRAIN[0]["question"], "5", "gsm8k/train/0"), (GSM8K_TRAIN[1]["question"], "920", "gsm8k/train/1")]
    assert fetch_dataset(parse_dataset_id("openai/gsm8k:main:test")).parent == file.parent
    assert [r.prompt for r in load_gsm8k("openai/gsm8k:main:test")] == [GSM8K_TEST[0]["question"]]


def test_the_same_rows_load_from_local_files(caches, tmp_path):
    local = tmp_path / "train.jsonl"
    local.write_text("".join(json.dumps(row) + "\n" for row in GSM8K_TRAIN))
    cache_gsm8k(caches.hub)
    fetch_dataset(parse_dataset_id("openai/gsm8k:main:train"))
    by_name, by_file = load_gsm8k("openai/gsm8k:main:train"), load_gsm8k(local)
    assert [(r.prompt, r.ground_truth, r.id, r.metadata) for r in by_name] == [
        (r.prompt, r.ground_truth, r.id, r.metadata) for r in by_file]


def test_dapo_math_and_aime_load_by_name(caches):
    cache_dapo_math(caches.hub)
    cache_aime(caches.hub)
    for name in ("BytedTsinghua-SIA/DAPO-Math-17k:train", "BytedTsinghua-SIA/AIME-2024:train"):
        fetch_dataset(parse_dataset_id(name))
    assert [r.ground_truth for r in load_dapo_math("BytedTsinghua-SIA/DAPO-Math-17k:train")] == ["0", "2", "4", "6"]
    assert [r.id for r in load_aime2024("BytedTsinghua-SIA/AIME-2024:train")] == [
        "aime2024/2024-I-1", "aime2024/2024-I-2", "aime2024/2024-I-3"]


def test_a_name_not_fetched_yet_is_one_line(caches):
    with pytest.raises(DatasetError) as err:
        load_gsm8k("openai/gsm8k:main:train")
    assert str(err.value) == (f"openai/gsm8k:main:train is not in PPO_DATA_ROOT ({caches.data}): fetch it first "
                              "(python launch.py prepare FILE, or any launch)")


@pytest.mark.parametrize("name, message", [
    ("openai/gsm8k:main:validation", "dataset openai/gsm8k:main:validation: ValueError: Unknown split "
                                     "\"validation\". Should be one of ['train', 'test']."),
    ("openai/gsm8k:socratic:train", "dataset openai/gsm8k:socratic:train: ValueError: BuilderConfig 'socratic' not "
                                    "found. Available: ['main']"),
])
def test_an_unknown_split_or_config_is_one_line(caches, name, message):
    cache_gsm8k(caches.hub)
    with pytest.raises(HubError) as err:
        fetch_dataset(parse_dataset_id(name))
    assert str(err.value) == message
    assert not list(caches.data.rglob("*.parquet"))


def test_a_dataset_not_in_the_hf_cache_is_refused_offline(caches):
    with pytest.raises(HubError, match=r"^dataset nobody/nothing:train is neither in PPO_DATA_ROOT \(.*\) nor in the "
                                       r"HF cache \(.*\) and HF_HUB_OFFLINE is set: fetch it where the hub can be "
                                       r"reached"):
        fetch_dataset(parse_dataset_id("nobody/nothing:train"))


def test_a_missing_column_is_one_line_naming_it(caches, tmp_path):
    rows = [{k: v for k, v in row.items() if k != "reward_model"} for row in DAPO_ROWS]
    local = tmp_path / "dapo.parquet"
    local.write_bytes(parquet_bytes(rows))
    with pytest.raises(DatasetError) as err:
        check_dapo_math_columns(local)
    assert str(err.value) == (f"{local} has no column 'reward_model' or 'solution' or 'answer' (columns: "
                              "data_source, ability, extra_info, prompt)")
    jsonl = tmp_path / "gsm8k.jsonl"
    jsonl.write_text(json.dumps({"question": "q", "solution": "#### 1"}) + "\n")
    with pytest.raises(DatasetError, match=r"gsm8k.jsonl has no column 'answer' \(columns: question, solution\)$"):
        check_gsm8k_columns(jsonl)
    cache_gsm8k(caches.hub)
    fetch_dataset(parse_dataset_id("openai/gsm8k:main:test"))
    check_gsm8k_columns("openai/gsm8k:main:test")  # by name: the fetched file's columns
