"""From a record to the prompt's token ids: a plain format string, optionally passed through a chat template.

A template is a Python format string over the record's fields, ``{prompt}`` (alias ``{question}``) and any key of
``record.metadata``, so a recipe states its prompt wording in one line (``"Question: {prompt}\\nAnswer:"``). The ground
truth is deliberately not a field: no template can leak the answer into the prompt.

With ``use_chat_template=True`` the formatted text becomes the user message (after an optional system message) and
the tokenizer's own chat template builds the final text, ending with the assistant header (``add_generation_prompt``),
which is how instruction-tuned models were trained.

Special tokens: a chat template writes its own (a BOS, role markers), so its text is encoded with
``add_special_tokens=False`` — letting the tokenizer add a BOS as well would double it. A plain template is encoded
the tokenizer's default way (``add_special_tokens=True``), which adds a BOS exactly for the tokenizers that expect one
(and nothing for the project's own, see :mod:`ppo.data.tokenizer`).
"""

from __future__ import annotations

import logging
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppo.data.records import Record

logger = logging.getLogger(__name__)

PLAIN_TEMPLATE = "{prompt}"
GSM8K_TEMPLATE = "Question: {prompt}\nAnswer:"
DAPO_MATH_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
    "{prompt}\n\n"
    'Remember to put your answer on its own line after "Answer:".'
)
"""DAPO's instruction wrapper, for bare problems (AIME, MATH) shown to a policy trained on DAPO-Math-17k, whose
prompts already contain it (do not wrap those twice)."""


def _template_fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


@dataclass(frozen=True)
class PromptTemplate:
    """How a record becomes prompt text and token ids. The default is the bare problem text, no chat template."""

    template: str = PLAIN_TEMPLATE
    use_chat_template: bool = False
    system_prompt: str | None = None

    def __post_init__(self) -> None:
        for name in _template_fields(self.template):
            if not name or not name.isidentifier():
                raise ValueError(
                    f"prompt template {self.template!r}: field {{{name}}} must be a plain name like {{prompt}} "
                    "(positional, attribute and index fields are not supported; write literal braces as {{ }})"
                )
        if self.system_prompt is not None and not self.use_chat_template:
            raise ValueError("system_prompt needs use_chat_template=True (a plain template has no system turn)")

    def format(self, record: Record) -> str:
        """The template filled from the record: the user message's text."""
        fields: dict[str, Any] = {**record.metadata, "prompt": record.prompt, "question": record.prompt}
        missing = [name for name in _template_fields(self.template) if name not in fields]
        if missing:
            raise ValueError(
                f"prompt template {self.template!r} uses {', '.join('{' + m + '}' for m in missing)}, which record "
                f"{record.id} does not have (fields: {', '.join(sorted(fields))})"
            )
        return self.template.format_map(fields)

    def render(self, record: Record, tokenizer: Any = None) -> str:
        """The full prompt text the tokenizer encodes (the chat template applied when asked for)."""
        text = self.format(record)
        if not self.use_chat_template:
            return text
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("use_chat_template=True needs a tokenizer with a chat template")
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        messages.append({"role": "user", "content": text})
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def encode(self, record: Record, tokenizer: Any) -> list[int]:
        """The prompt's token ids."""
        return self.encode_many([record], tokenizer)[0]

    def encode_many(self, records: Sequence[Record], tokenizer: Any) -> list[list[int]]:
        """Token ids of many prompts in one batched tokenizer call (the fast tokenizers encode in parallel)."""
        if not records:
            return []
        texts = [self.render(record, tokenizer) for record in records]
        encoded = tokenizer(texts, add_special_tokens=not self.use_chat_template)
        return [list(ids) for ids in encoded["input_ids"]]


@dataclass(frozen=True)
class LengthFilterResult:
    """What :func:`filter_by_prompt_length` kept, with the kept prompts' ids so they need not be encoded again."""

    records: list[Record]
    prompt_ids: list[list[int]]
    dropped: int
    total: int
    max_prompt_tokens: int

    @property
    def message(self) -> str:
        return f"dropped {self.dropped} of {self.total} prompts longer than {self.max_prompt_tokens} tokens"


def filter_by_prompt_length(
    records: Sequence[Record],
    tokenizer: Any,
    max_prompt_tokens: int,
    template: PromptTemplate = PromptTemplate(),
) -> LengthFilterResult:
    """Drop records whose prompt, as ``template`` renders and ``tokenizer`` encodes it, exceeds ``max_prompt_tokens``.

    Prompts are measured exactly as they will be fed to the policy, so a kept prompt always fits. A prompt that does
    not fit is dropped rather than truncated: a truncated math problem usually loses the question, and its reward
    would then only be noise. The count is returned and logged once (a warning when anything was dropped).
    """
    if max_prompt_tokens < 1:
        raise ValueError(f"max_prompt_tokens must be >= 1, got {max_prompt_tokens}")
    all_ids = template.encode_many(records, tokenizer)
    kept = [(record, ids) for record, ids in zip(records, all_ids) if len(ids) <= max_prompt_tokens]
    result = LengthFilterResult(
        records=[record for record, _ in kept],
        prompt_ids=[ids for _, ids in kept],
        dropped=len(records) - len(kept),
        total=len(records),
        max_prompt_tokens=max_prompt_tokens,
    )
    logger.log(logging.WARNING if result.dropped else logging.INFO, result.message)
    return result
