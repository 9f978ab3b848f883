"""Small tokenizers the project builds itself, deterministically and without downloads.

Both kinds are built with the ``tokenizers`` library and wrapped as a ``transformers`` fast tokenizer, so that
``save_pretrained(model_dir)`` writes the files ``AutoTokenizer.from_pretrained`` — and therefore vLLM, which loads
the tokenizer from the model directory — read back:

- :func:`build_char_tokenizer` / :func:`build_arithmetic_tokenizer`: one token per character of a fixed alphabet
  (the arithmetic task's ``0-9 + - =``). A tiny model on the CPU task sees exactly the symbols of the problem.
  A character outside the alphabet is an error, not an unknown token: on a synthetic task it can only be a bug
  (``tokenizers`` words it "WordLevel error: Missing [UNK] token from the vocabulary").
- :func:`build_bpe_tokenizer` / :func:`build_gsm8k_tokenizer`: a byte-level BPE trained on given texts (the
  GSM8K train split). Byte level means every string encodes and decodes back exactly (GSM8K has ``€``, ``½``,
  ``−``, ...); at 1024 tokens the merges make GSM8K questions ~2.8× shorter than characters (85 tokens on average,
  377 at most). Training is deterministic: the same texts and settings give byte-identical files (checked across
  processes and thread counts).

Ids are fixed: ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, then the rest. No special token is added when encoding
(no BOS, no EOS): prompts are exactly their text, and generation stops at ``<eos>``.

Both carry a chat template so prompt building can go through ``tokenizer.apply_chat_template`` the way it does for
instruction-tuned models. The character tokenizer's template only concatenates message contents (its alphabet has no
letters for role names); the BPE tokenizer's marks roles with special tokens ``<|system|>``, ``<|user|>``,
``<|assistant|>``. Assistant turns end in ``<eos>``, so supervised warm starts and generation agree on the stop token.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ppo.data.arithmetic import ALPHABET as ARITHMETIC_ALPHABET
from ppo.data.gsm8k import load_gsm8k

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
SPECIAL_TOKENS = (PAD, EOS, BOS)
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")

CONCAT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['content'] }}{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)
"""Message contents back to back; ``add_generation_prompt`` adds nothing (the prompt already ends in ``=``)."""

ROLE_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
"""``<|user|>\\n{content}\\n<|assistant|>\\n`` for a generation prompt; roles are single special tokens.

Newlines are written as expressions because transformers renders chat templates with ``trim_blocks``, which eats a
newline that directly follows a block tag."""


def _wrap(tokenizer: Tokenizer, chat_template: str | None) -> PreTrainedTokenizerFast:
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, eos_token=EOS, bos_token=BOS)
    wrapped.chat_template = chat_template
    return wrapped


def build_char_tokenizer(
    alphabet: str, *, chat_template: str | None = CONCAT_CHAT_TEMPLATE
) -> PreTrainedTokenizerFast:
    """One token per character of ``alphabet`` (ids 3.. in the alphabet's order) after ``<pad>``, ``<eos>``, ``<bos>``.

    Encoding a character outside the alphabet raises (the word-level model has no unknown token).
    """
    if not alphabet:
        raise ValueError("alphabet is empty")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError(f"alphabet has repeated characters: {alphabet!r}")
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *alphabet])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return _wrap(tokenizer, chat_template)


def build_arithmetic_tokenizer() -> PreTrainedTokenizerFast:
    """The CPU task's 16-token vocabulary: ``<pad> <eos> <bos> 0-9 + - =``."""
    return build_char_tokenizer(ARITHMETIC_ALPHABET)


def build_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 1024,
    *,
    min_frequency: int = 2,
    chat_template: str | None = ROLE_CHAT_TEMPLATE,
) -> PreTrainedTokenizerFast:
    """A byte-level BPE of ``vocab_size`` tokens (specials, role tokens, all 256 bytes, merges) trained on ``texts``.

    The texts are consumed in the given order; with the same texts the result is the same every time.
    """
    specials = [*SPECIAL_TOKENS, *ROLE_TOKENS]
    if vocab_size < len(specials) + 256:
        raise ValueError(f"vocab_size must be at least {len(specials) + 256} (specials + 256 bytes), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return _wrap(tokenizer, chat_template)


def build_gsm8k_tokenizer(train_path: str | Path, vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the questions and worked solutions of a GSM8K train file, in file order."""
    records = load_gsm8k(train_path)
    texts = (text for record in records for text in (record.prompt, record.metadata["solution"]))
    return build_bpe_tokenizer(texts, vocab_size)
