from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from ppo.data import ArithmeticTask, load_gsm8k
from ppo.data.tokenizer import ROLE_TOKENS, build_arithmetic_tokenizer, build_bpe_tokenizer, build_char_tokenizer

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, timeout: float = 300) -> str:
    """Run code in a fresh interpreter (own hash seed, own thread pools, nothing imported from this process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", textwrap.dedent(code)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def saved_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_arithmetic_vocabulary_and_round_trip(arithmetic_tokenizer):
    tok = arithmetic_tokenizer
    assert len(tok) == 16
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    assert tok.convert_ids_to_tokens(list(range(3, 16))) == list("0123456789+-=")
    for record in ArithmeticTask(digits=3, num_operands=3, operations="+-").generate("train", 200, seed=0):
        text = record.prompt + record.ground_truth
        ids = tok(text)["input_ids"]
        assert len(ids) == len(text)
        assert ids == [3 + "0123456789+-=".index(c) for c in text]
        assert tok.decode(ids) == text
    assert tok.decode([4, 5, 1, 0, 0], skip_special_tokens=True) == "12"


def test_characters_outside_the_alphabet_are_refused(arithmetic_tokenizer):
    with pytest.raises(Exception, match="UNK"):
        arithmetic_tokenizer("12 + 3")


def test_char_tokenizer_handles_whitespace_and_rejects_bad_alphabets():
    tok = build_char_tokenizer("ab \n")
    text = "a b\nba\n"
    assert tok.decode(tok(text)["input_ids"]) == text
    assert len(tok(text)["input_ids"]) == len(text)
    with pytest.raises(ValueError, match="repeated"):
        build_char_tokenizer("abca")
    with pytest.raises(ValueError, match="empty"):
        build_char_tokenizer("")


def test_chat_templates_render_the_documented_text(arithmetic_tokenizer, gsm8k_tokenizer):
    messages = [{"role": "user", "content": "12+34="}]
    assert arithmetic_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == "12+34="
    with_answer = messages + [{"role": "assistant", "content": "46"}]
    assert arithmetic_tokenizer.apply_chat_template(with_answer, tokenize=False) == "12+34=46<eos>"

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    text = gsm8k_tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert text == "<|system|>\nBe brief.\n<|user|>\nWhat is 2+2?\n<|assistant|>\n"
    ids = gsm8k_tokenizer(text, add_special_tokens=False)["input_ids"]
    role_ids = gsm8k_tokenizer.convert_tokens_to_ids(list(ROLE_TOKENS))
    assert [i for i in ids if i in role_ids] == [role_ids[0], role_ids[1], role_ids[2]]
    assert gsm8k_tokenizer.decode(ids) == text


def test_bpe_round_trips_every_gsm8k_test_text_and_compresses(gsm8k_dir, gsm8k_tokenizer):
    tok = gsm8k_tokenizer
    assert len(tok) == 1024
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    texts = [t for r in load_gsm8k(gsm8k_dir / "test.jsonl") for t in (r.prompt, r.metadata["solution"])]
    texts.append("Café: €5,000 − ½ × 3 √2 ‘quoted’ “too”\u2028\u200b end")
    encoded = tok(texts)["input_ids"]
    assert [tok.decode(ids) for ids in encoded] == texts
    n_tokens = sum(map(len, encoded))
    n_bytes = sum(len(t.encode()) for t in texts)
    assert n_tokens < 0.5 * n_bytes


def test_bpe_vocab_size_floor():
    with pytest.raises(ValueError, match="at least 262"):
        build_bpe_tokenizer(["abc"], vocab_size=200)


@pytest.mark.parametrize("build", ["arithmetic", "bpe"])
def test_save_and_load_through_auto_tokenizer(tmp_path, build, arithmetic_tokenizer, gsm8k_tokenizer):
    tok = arithmetic_tokenizer if build == "arithmetic" else gsm8k_tokenizer
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.get_vocab() == tok.get_vocab()
    assert (loaded.pad_token, loaded.eos_token, loaded.bos_token) == ("<pad>", "<eos>", "<bos>")
    assert loaded.chat_template == tok.chat_template
    text = "12+34=46" if build == "arithmetic" else "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72"
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.decode(loaded(text)["input_ids"]) == text
    messages = [{"role": "user", "content": "12+34="}]
    assert loaded.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == (
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    )


@pytest.mark.slow
def test_builds_are_byte_identical_across_processes(tmp_path, gsm8k_dir):
    build_arithmetic_tokenizer().save_pretrained(tmp_path / "arith_here")
    from ppo.data.tokenizer import build_gsm8k_tokenizer

    build_gsm8k_tokenizer(gsm8k_dir / "train.jsonl", vocab_size=700).save_pretrained(tmp_path / "bpe_here")
    run_python(
        f"""
        from ppo.data.tokenizer import build_arithmetic_tokenizer, build_gsm8k_tokenizer
        build_arithmetic_tokenizer().save_pretrained({str(tmp_path / "arith_there")!r})
        build_gsm8k_tokenizer({str(gsm8k_dir / "train.jsonl")!r}, vocab_size=700).save_pretrained(
            {str(tmp_path / "bpe_there")!r})
        """
    )
    for name in ("arith", "bpe"):
        here, there = saved_files(tmp_path / f"{name}_here"), saved_files(tmp_path / f"{name}_there")
        assert set(here) >= {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}
        assert here == there
    assert json.loads(saved_files(tmp_path / "bpe_here")["tokenizer.json"])["model"]["type"] == "BPE"


@pytest.mark.slow
def test_vllm_loads_the_saved_tokenizers_and_generates_with_one(tmp_path, arithmetic_tokenizer, gsm8k_tokenizer):
    """The real path: vLLM reads the tokenizer from a model directory, encodes text prompts and detokenizes.

    One subprocess for both checks: importing vLLM costs ~25 s on 2 cores.
    """
    arithmetic_tokenizer.save_pretrained(tmp_path / "arith")
    gsm8k_tokenizer.save_pretrained(tmp_path / "bpe")
    out = run_python(
        f"""
        import json, os
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM
        from vllm.tokenizers import get_tokenizer
        from ppo.data.tokenizer import build_arithmetic_tokenizer

        result = {{}}
        for name, text in (("arith", "12+34=46"), ("bpe", "Weng earns $12 an hour.")):
            tok = get_tokenizer({str(tmp_path)!r} + "/" + name)
            ids = tok.encode(text, add_special_tokens=False)
            chat = tok.apply_chat_template([{{"role": "user", "content": "1+1="}}], add_generation_prompt=True,
                                           tokenize=False)
            result[name] = {{"ids": ids, "text": tok.decode(ids), "eos": tok.eos_token_id, "chat": chat}}

        model_dir = {str(tmp_path / "model")!r}
        tok = build_arithmetic_tokenizer()
        config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                             bos_token_id=tok.bos_token_id, tie_word_embeddings=True)
        torch.manual_seed(0)
        Qwen2ForCausalLM(config).save_pretrained(model_dir)
        tok.save_pretrained(model_dir)

        from vllm import LLM, SamplingParams
        llm = LLM(model=model_dir, dtype="float32", enforce_eager=True, max_model_len=32,
                  kv_cache_memory_bytes=1 << 24, seed=0)
        outputs = llm.generate(["12+34=", "05+70="], SamplingParams(n=4, max_tokens=6, temperature=1.0),
                               use_tqdm=False)
        result["generate"] = [{{"prompt_ids": list(o.prompt_token_ids),
                                "samples": [{{"ids": list(c.token_ids), "text": c.text}} for c in o.outputs]}}
                              for o in outputs]
        print("RESULT " + json.dumps(result))
        """,
        timeout=600,
    )
    result = json.loads(out.split("RESULT ", 1)[1])
    tok = arithmetic_tokenizer
    assert result["arith"] == {"ids": tok("12+34=46")["input_ids"], "text": "12+34=46", "eos": 1, "chat": "1+1="}
    assert result["bpe"]["ids"] == gsm8k_tokenizer("Weng earns $12 an hour.")["input_ids"]
    assert result["bpe"]["text"] == "Weng earns $12 an hour."
    assert result["bpe"]["chat"] == "<|user|>\n1+1=\n<|assistant|>\n"

    generated = result["generate"]
    assert [r["prompt_ids"] for r in generated] == [tok("12+34=")["input_ids"], tok("05+70=")["input_ids"]]
    samples = [s for r in generated for s in r["samples"]]
    assert len(samples) == 8
    for sample in samples:
        assert all(0 <= i < len(tok) for i in sample["ids"])
        assert sample["text"] == tok.decode(sample["ids"], skip_special_tokens=True)
    assert len({tuple(s["ids"]) for s in samples}) > 1
