from __future__ import annotations

from pathlib import Path

import pytest

from ppo.data import SHARED_GSM8K_DIR


@pytest.fixture(scope="session")
def gsm8k_dir() -> Path:
    if not (SHARED_GSM8K_DIR / "train.jsonl").is_file():
        pytest.skip(f"the shared GSM8K copy is not at {SHARED_GSM8K_DIR}")
    return SHARED_GSM8K_DIR


@pytest.fixture(scope="session")
def gsm8k_tokenizer(gsm8k_dir):
    from ppo.data.tokenizer import build_gsm8k_tokenizer

    return build_gsm8k_tokenizer(gsm8k_dir / "train.jsonl")


@pytest.fixture(scope="session")
def arithmetic_tokenizer():
    from ppo.data.tokenizer import build_arithmetic_tokenizer

    return build_arithmetic_tokenizer()
