"""How a string is read: a hub model id, a hub dataset id, or a local path; and where the caches are."""

from pathlib import Path

import pytest

from ppo.data.hub import HubDataset, data_root, dataset_file, parse_dataset_id
from ppo.hub import hub_cache
from ppo.models.hub import HubModel, parse_model_id


@pytest.mark.parametrize("text, model", [
    ("Qwen/Qwen2.5-1.5B", HubModel("Qwen/Qwen2.5-1.5B")),
    ("Qwen/Qwen2.5-1.5B@main", HubModel("Qwen/Qwen2.5-1.5B", "main")),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B@refs/pr/3", HubModel("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                                                                   "refs/pr/3")),
    ("org/name@0123456789abcdef0123456789abcdef01234567", HubModel("org/name",
                                                                   "0123456789abcdef0123456789abcdef01234567")),
    ("/shared/models/Qwen/Qwen2.5-1.5B", None),  # absolute
    ("./Qwen/Qwen2.5-1.5B", None),  # relative, spelled as one
    ("~/models/qwen", None),
    ("runs/old/checkpoints/step_000100", None),  # more than one '/'
    ("Qwen2.5-1.5B", None),  # no org
    ("Qwen/Qwen2.5-1.5B@", None),
    ("", None),
])
def test_model_ids(text, model):
    assert parse_model_id(text) == model
    if model is not None:
        assert str(model) == text


def test_a_folder_that_exists_here_is_local_whatever_its_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert parse_model_id("org/name") is None
    assert parse_model_id("org/other") == HubModel("org/other")


@pytest.mark.parametrize("text, dataset", [
    ("BytedTsinghua-SIA/DAPO-Math-17k:train", HubDataset("BytedTsinghua-SIA/DAPO-Math-17k", "train")),
    ("openai/gsm8k:main:test", HubDataset("openai/gsm8k", "test", config="main")),
    ("openai/gsm8k@v1.0:main:test", HubDataset("openai/gsm8k", "test", config="main", revision="v1.0")),
    ("HuggingFaceH4/aime_2024@refs/convert/parquet:train", HubDataset("HuggingFaceH4/aime_2024", "train",
                                                                      revision="refs/convert/parquet")),
    ("openai/gsm8k", None),  # no split
    ("gsm8k/train.jsonl", None),  # a data file, whatever else it looks like
    ("data/aime.parquet", None),
    ("/shared/data/gsm8k/train.jsonl", None),
    ("./org/name:train", None),
])
def test_dataset_ids(text, dataset):
    assert parse_dataset_id(text) == dataset
    if dataset is not None:
        assert str(dataset) == text


def test_a_fetched_split_lives_under_the_data_root_by_repository_revision_config_and_split(monkeypatch, tmp_path):
    monkeypatch.setenv("PPO_DATA_ROOT", str(tmp_path))
    assert dataset_file(parse_dataset_id("openai/gsm8k:main:test")) == tmp_path / "openai/gsm8k/main/test.parquet"
    assert dataset_file(parse_dataset_id("BytedTsinghua-SIA/DAPO-Math-17k@v2:train")) == (
        tmp_path / "BytedTsinghua-SIA/DAPO-Math-17k@v2/default/train.parquet")
    assert dataset_file(parse_dataset_id("org/name@refs/pr/1:train")) == (
        tmp_path / "org/name@refs--pr--1/default/train.parquet")


def test_the_roots_follow_the_environment(monkeypatch, tmp_path):
    for name in ("PPO_DATA_ROOT", "HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_root() == tmp_path / "home/.cache/ppo/data"
    assert hub_cache() == tmp_path / "home/.cache/huggingface/hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert (data_root(), hub_cache()) == (tmp_path / "xdg/ppo/data", tmp_path / "xdg/huggingface/hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub_cache() == tmp_path / "hf/hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("PPO_DATA_ROOT", str(tmp_path / "data"))
    assert (data_root(), hub_cache()) == (Path(tmp_path / "data"), tmp_path / "hub")
