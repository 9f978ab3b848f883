from __future__ import annotations

import logging

import pytest
from tokenizers import processors

from ppo.data import DAPO_MATH_TEMPLATE, GSM8K_TEMPLATE, PromptTemplate, Record, filter_by_prompt_length, load_gsm8k
from ppo.data.tokenizer import build_char_tokenizer

RECORD = Record(prompt="12+34=", ground_truth="46", id="r0", metadata={"topic": "sums"})


def bos_adding_tokenizer():
    """A Llama-like tokenizer: its encoder adds a BOS and its chat template writes one too."""
    template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tok = build_char_tokenizer("0123456789+-=", chat_template=template)
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    return tok


def test_format_fields():
    assert PromptTemplate().format(RECORD) == "12+34="
    assert PromptTemplate("{question}\nAnswer:").format(RECORD) == "12+34=\nAnswer:"
    assert PromptTemplate("[{topic}] {prompt} {{literal}}").format(RECORD) == "[sums] 12+34= {literal}"
    assert GSM8K_TEMPLATE.format(prompt="Q?") == "Question: Q?\nAnswer:"
    wrapped = PromptTemplate(DAPO_MATH_TEMPLATE).format(RECORD)
    assert wrapped.startswith("Solve the following math problem step by step.") and "\n\n12+34=\n\n" in wrapped


def test_the_answer_cannot_be_templated_and_bad_fields_are_named():
    with pytest.raises(ValueError, match=r"uses \{ground_truth\}, which record r0 does not have"):
        PromptTemplate("{prompt} {ground_truth}").format(RECORD)
    for bad in ("{0}", "{}", "{prompt.upper}", "{metadata[topic]}"):
        with pytest.raises(ValueError, match="plain name"):
            PromptTemplate(bad)
    with pytest.raises(ValueError, match="system_prompt needs use_chat_template"):
        PromptTemplate(system_prompt="You are helpful.")


def test_plain_template_ids(arithmetic_tokenizer):
    assert PromptTemplate().encode(RECORD, arithmetic_tokenizer) == [4, 5, 13, 6, 7, 15]


def test_chat_template_ids(gsm8k_tokenizer):
    template = PromptTemplate(GSM8K_TEMPLATE, use_chat_template=True, system_prompt="Think.")
    record = Record(prompt="What is 2+2?", ground_truth="4", id="q")
    text = template.render(record, gsm8k_tokenizer)
    assert text == "<|system|>\nThink.\n<|user|>\nQuestion: What is 2+2?\nAnswer:\n<|assistant|>\n"
    ids = template.encode(record, gsm8k_tokenizer)
    assert ids == gsm8k_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert gsm8k_tokenizer.decode(ids) == text
    assert ids[0] == gsm8k_tokenizer.convert_tokens_to_ids("<|system|>")
    with pytest.raises(ValueError, match="needs a tokenizer with a chat template"):
        PromptTemplate(use_chat_template=True).render(record)


def test_one_bos_whichever_path():
    tok = bos_adding_tokenizer()
    plain = PromptTemplate().encode(RECORD, tok)
    chat = PromptTemplate(use_chat_template=True).encode(RECORD, tok)
    assert plain == chat == [2, 4, 5, 13, 6, 7, 15]


def test_encode_many_equals_one_by_one(gsm8k_dir, gsm8k_tokenizer):
    records = load_gsm8k(gsm8k_dir / "test.jsonl", limit=50)
    for template in (PromptTemplate(GSM8K_TEMPLATE), PromptTemplate(use_chat_template=True)):
        assert template.encode_many(records, gsm8k_tokenizer) == [template.encode(r, gsm8k_tokenizer) for r in records]
    assert PromptTemplate().encode_many([], gsm8k_tokenizer) == []


def test_length_filter_counts_and_logs_once(arithmetic_tokenizer, caplog):
    records = [Record(prompt=p, ground_truth="0", id=str(i)) for i, p in enumerate(["1=", "12=", "123=", "1234=", "9"])]
    with caplog.at_level(logging.INFO, logger="ppo.data.prompts"):
        result = filter_by_prompt_length(records, arithmetic_tokenizer, max_prompt_tokens=3)
    assert [r.prompt for r in result.records] == ["1=", "12=", "9"]
    assert result.prompt_ids == [arithmetic_tokenizer(r.prompt)["input_ids"] for r in result.records]
    assert (result.dropped, result.total) == (2, 5)
    assert result.message == "dropped 2 of 5 prompts longer than 3 tokens"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", result.message)]

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ppo.data.prompts"):
        kept_all = filter_by_prompt_length(records, arithmetic_tokenizer, max_prompt_tokens=5)
    assert kept_all.dropped == 0 and kept_all.records == records
    logged = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert logged == [("INFO", "dropped 0 of 5 prompts longer than 5 tokens")]
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        filter_by_prompt_length(records, arithmetic_tokenizer, max_prompt_tokens=0)


@pytest.mark.slow
def test_length_filter_measures_the_rendered_prompt(gsm8k_dir, gsm8k_tokenizer):
    records = load_gsm8k(gsm8k_dir / "train.jsonl")
    template = PromptTemplate(GSM8K_TEMPLATE, use_chat_template=True)
    lengths = [len(ids) for ids in template.encode_many(records, gsm8k_tokenizer)]
    limit = sorted(lengths)[int(0.95 * len(lengths))]
    result = filter_by_prompt_length(records, gsm8k_tokenizer, limit, template)
    assert result.dropped == sum(n > limit for n in lengths) > 0
    assert result.total == 7473 and len(result.records) == 7473 - result.dropped
    assert max(map(len, result.prompt_ids)) == limit
    assert all(template.encode(r, gsm8k_tokenizer) == ids for r, ids in zip(result.records[:20], result.prompt_ids))
    bare = filter_by_prompt_length(records, gsm8k_tokenizer, limit)
    assert bare.dropped < result.dropped
