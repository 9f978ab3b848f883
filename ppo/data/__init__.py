"""Datasets, prompt templates, tokenizers and the prompt loader.

Every dataset becomes a list of :class:`Record` (prompt text, ground-truth answer string, stable id, metadata):

- :func:`load_gsm8k` — GSM8K jsonl;  :func:`load_dapo_math` — DAPO-Math-17k parquet/jsonl;
  :func:`load_aime2024` — AIME 2024 in its common layouts;  :class:`ArithmeticTask` — the synthetic CPU task.
- :class:`PromptTemplate` turns a record into prompt token ids (a format string, optionally a chat template);
  :func:`filter_by_prompt_length` drops prompts that do not fit.
- :class:`PromptLoader` serves seeded, resumable batches of ``prompts_per_step`` records.
- :func:`build_arithmetic_tokenizer`, :func:`build_gsm8k_tokenizer` build small tokenizers locally and
  deterministically, savable next to a model for transformers and vLLM.

The tokenizer builders live in :mod:`ppo.data.tokenizer` and are imported from there: they pull in
``transformers``, which the data loading does not need, so this package does not re-export them.
"""

from __future__ import annotations

from ppo.data.aime import load_aime2024
from ppo.data.arithmetic import ArithmeticTask
from ppo.data.dapo import load_dapo_math
from ppo.data.gsm8k import BUNDLED_GSM8K_DIR, SHARED_GSM8K_DIR, load_gsm8k
from ppo.data.loader import PromptLoader, batched
from ppo.data.prompts import (
    DAPO_MATH_TEMPLATE,
    GSM8K_TEMPLATE,
    PLAIN_TEMPLATE,
    LengthFilterResult,
    PromptTemplate,
    filter_by_prompt_length,
)
from ppo.data.records import DatasetError, Record, read_rows

__all__ = [
    "ArithmeticTask",
    "DAPO_MATH_TEMPLATE",
    "DatasetError",
    "GSM8K_TEMPLATE",
    "LengthFilterResult",
    "PLAIN_TEMPLATE",
    "PromptLoader",
    "PromptTemplate",
    "Record",
    "BUNDLED_GSM8K_DIR",
    "SHARED_GSM8K_DIR",
    "batched",
    "filter_by_prompt_length",
    "load_aime2024",
    "load_dapo_math",
    "load_gsm8k",
    "read_rows",
]

