"""``launch.py export`` on a run directory of the embedded default whose checkpoint step is made with the model-level
API (a policy and a 1-layer critic moved away from the initial model, saved as the trainer saves them): the policy's
folder loads on its own in transformers with the logits the Megatron policy computes, and in vLLM, which generates
transformers' greedy tokens; the critic's loads as ``AutoModelForTokenClassification`` with the critic's values.
The end-to-end use on a real run is in ``tests/trainer/test_functional_gates.py``."""

import contextlib
import dataclasses
import io

import pytest
import ray
import torch

from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.checkpoint import model_pieces, save_checkpoint
from ppo.models.convert import VALUE_HEAD, hf_to_megatron, load_hf_state_dict, load_megatron_state
from ppo.models.forward import full_logits
from ppo.models.training import ModelUpdater
from ppo.models.value import build_value_model, token_values
from tests.launch.conftest import REPO, launch_script

pytestmark = pytest.mark.slow

PROMPTS = ("12+34=", "05+70=", "99+01=")


def moved(model, seed: int):
    """``model`` with every weight moved (a trained step's weights differ from the initial model's everywhere)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model.eval()


def export(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = launch_script().main(["export", *map(str, args)])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def run(megatron_world, tmp_path_factory):
    """A run directory as a launch writes it, with a complete checkpoint at step 2 and a torn one at step 3; the
    Megatron policy and critic that step 2 holds; and both exported (the policy in several safetensors files)."""
    from ppo.launch.prepare import Request, prepare
    from ppo.launch.rundir import write_run_dir

    root = tmp_path_factory.mktemp("export")
    prepared = prepare(Request(str(REPO / "experiments" / "tiny_cpu.py")))
    run_dir = write_run_dir(prepared, ["launch.py", "experiments/tiny_cpu.py"], root / "run")
    exp = prepared.experiment
    model_dir = exp.model.materialize(run_dir, exp.task)
    arch, hf = Architecture.from_pretrained(model_dir), load_hf_state_dict(model_dir)
    policy = build_gpt_model(arch)
    load_megatron_state(policy, hf_to_megatron(hf, arch))
    critic_arch = dataclasses.replace(arch, num_layers=exp.critic.layers_of(arch.num_layers))  # as the worker does
    critic = build_value_model(critic_arch)
    load_megatron_state(critic, hf_to_megatron(hf, critic_arch, value_head=True), optional=(VALUE_HEAD,))
    step = run_dir / "checkpoints" / "step_000002"
    save_checkpoint(ModelUpdater(moved(policy, seed=1), exp.policy.optimizer), step / "policy")
    save_checkpoint(ModelUpdater(moved(critic, seed=2), exp.critic.optimizer), step / "critic")
    (step / "trainer_state.json").write_text("{}")
    (run_dir / "checkpoints" / "step_000003.partial" / "policy").mkdir(parents=True)  # a save that never finished
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ppo.models.export.SHARD_BYTES", 1 << 20)  # the policy's 2.4 MB in three files
        answers = [export(run_dir, "--out", root / "policy"), export(run_dir, "--critic", "--out", root / "critic")]
    assert [rc for rc, _, _ in answers] == [0, 0], answers
    return {"dir": run_dir, "policy": policy, "critic": critic, "vocab": arch.vocab_size,
            "out": root / "policy", "critic_out": root / "critic", "printed": answers[0][1]}


def test_the_checkpoint_is_read_a_layer_at_a_time(run):
    layers = [sorted({name.split(".")[2] for name in piece if name.startswith("decoder.layers.")})
              for piece in model_pieces(run["dir"] / "checkpoints" / "step_000002" / "policy")]
    assert layers == [[], ["0"], ["1"], ["2"], []]


def test_the_policy_loads_in_transformers_with_the_policys_logits(run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = run["out"]
    assert run["printed"] == f"{out}: the policy of {run['dir']} at step 2, an HF folder (weights, config and " \
                             f"tokenizer of {run['dir'] / 'initial_model'})\n"
    assert (out / "model.safetensors.index.json").is_file() and len(list(out.glob("model-*.safetensors"))) == 3
    tokenizer = AutoTokenizer.from_pretrained(out)  # the folder loads on its own
    ids = torch.tensor([tokenizer(p)["input_ids"] for p in PROMPTS])
    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        ours = full_logits(run["policy"], ids, torch.ones_like(ids))
        theirs = hf(input_ids=ids).logits
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_the_critic_loads_as_a_token_classifier_with_the_critics_values(run):
    from transformers import AutoConfig, AutoModelForTokenClassification

    out = run["critic_out"]
    assert AutoConfig.from_pretrained(out).num_hidden_layers == 1
    hf = AutoModelForTokenClassification.from_pretrained(out, dtype=torch.float32).eval()
    ids = torch.randint(0, run["vocab"], (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = token_values(run["critic"], ids, torch.ones_like(ids))  # V at t scores the prefix before t
        theirs = hf(input_ids=ids).logits[..., 0]
    assert (ours[:, 1:] - theirs[:, :-1]).abs().max().item() <= 1e-5


def test_vllm_generates_from_the_policys_folder_what_transformers_does(ray_runtime, run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ppo.rollout.generation import spawn_generation_worker
    from ppo.rollout.settings import SamplingConfig, VLLMGeneration

    out = run["out"]
    tokenizer = AutoTokenizer.from_pretrained(out)
    prompts, eos = [tokenizer(p)["input_ids"] for p in PROMPTS], tokenizer.eos_token_id
    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    actor = spawn_generation_worker(VLLMGeneration(model_path=str(out), dtype="float32", max_model_len=32,
                                                   kv_cache_bytes=16 << 20, enable_prefix_caching=False, seed=0))
    try:
        greedy = SamplingConfig(n=1, temperature=0.0, max_new_tokens=6, stop_token_ids=(eos,))
        samples = [group[0] for group in ray.get(actor.generate.remote(prompts, greedy))]
    finally:
        ray.kill(actor)
    for prompt, sample in zip(prompts, samples):
        ids = torch.tensor([prompt])
        with torch.no_grad():
            expected = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=6,
                                   eos_token_id=eos, pad_token_id=eos)[0, len(prompt):].tolist()
        assert sample.token_ids == expected[: expected.index(eos) + 1] if eos in expected else expected
