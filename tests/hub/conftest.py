"""Fixtures of the hub tests: an HF cache and a PPO_DATA_ROOT of the test's own (offline), and what goes in them."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments._base import HF_CONFIGS
from tests.hub.cache import (
    AIME_ROWS,
    DAPO_ROWS,
    GSM8K_TEST,
    GSM8K_TRAIN,
    cache_repo,
    gsm8k_files,
    model_files,
    parquet_bytes,
)

REPO = Path(__file__).resolve().parents[2]
MATH_1B = str(REPO / "experiments" / "math_1b.py")

@pytest.fixture
def caches(tmp_path, monkeypatch) -> SimpleNamespace:
    """Empty caches for this test, offline: ``.hub`` (HF_HUB_CACHE) and ``.data`` (PPO_DATA_ROOT)."""
    hub, data = tmp_path / "hf-hub", tmp_path / "ppo-data"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("PPO_DATA_ROOT", str(data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return SimpleNamespace(hub=hub, data=data)


def tiny_qwen_config() -> dict:
    """Qwen2.5-1.5B's config.json with a shorter context: what math_1b reads once the model is in the cache (the
    recipe's own copy differs, so a test can tell which one was read)."""
    return copy.deepcopy(HF_CONFIGS["Qwen/Qwen2.5-1.5B"]) | {"max_position_embeddings": 32768}


@pytest.fixture
def cached_model_folder(caches) -> Path:
    """``test-org/tiny-qwen`` in the cache: its snapshot folder."""
    return cache_repo(caches.hub, "test-org/tiny-qwen", model_files(tiny_qwen_config()))


def cache_dapo_math(hub: Path, rows: list[dict] = DAPO_ROWS) -> Path:
    """The layout of BytedTsinghua-SIA/DAPO-Math-17k (one parquet file under ``data/``, no dataset card)."""
    return cache_repo(hub, "BytedTsinghua-SIA/DAPO-Math-17k", {"data/dapo-math-17k.parquet": parquet_bytes(rows)},
                      repo_type="dataset")


def cache_aime(hub: Path) -> Path:
    return cache_repo(hub, "BytedTsinghua-SIA/AIME-2024", {"data/aime-2024.parquet": parquet_bytes(AIME_ROWS)},
                      repo_type="dataset")


def cache_gsm8k(hub: Path) -> Path:
    return cache_repo(hub, "openai/gsm8k", gsm8k_files(GSM8K_TRAIN, GSM8K_TEST), repo_type="dataset")


@pytest.fixture
def cached_math_data(caches) -> None:
    """math_1b's two datasets in the HF cache (not yet in PPO_DATA_ROOT)."""
    cache_dapo_math(caches.hub)
    cache_aime(caches.hub)
