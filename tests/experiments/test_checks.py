"""What ``prepare`` refuses in the GPU recipes before anything is created or submitted, and when input paths count.

The rule (:func:`ppo.launch.prepare.paths_required`): local and debug runs need their inputs on this machine, in a
dry run too; a SLURM submission checks them on the submitting host unless ``executor.check_paths=False``; a SLURM
dry run only lists the missing ones.  Node 0 checks them again when the job starts (``Experiment.run``).  The
recipes name their model and data by hub id, which a launch fetches (``tests/hub``); the tests here give local
paths instead, as on a cluster that keeps its own copies (:data:`CLUSTER_PATHS`).
"""

import json

import fiddle as fdl
import pytest

from experiments._base import HF_CONFIGS
from ppo.config.errors import ConfigError
from ppo.experiment import ExperimentError
from ppo.launch.prepare import Request, prepare
from tests.experiments.conftest import REPO
from tests.hub.cache import AIME_ROWS, DAPO_ROWS, parquet_bytes


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def prep(recipe: str, *overrides: str, dry_run: bool = True, executor: str | None = None):
    return prepare(Request(f"experiments/{recipe}.py", list(overrides), executor=executor, dry_run=dry_run))


def refusal(recipe: str, *overrides: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        prep(recipe, *overrides, **kwargs)
    return str(err.value)


CLUSTER_PATHS = ["model.path=/shared/models/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                 "task.train_path=/shared/data/DAPO-Math-17k/data/dapo-math-17k.parquet",
                 "task.val_path=/shared/data/AIME-2024/data/aime-2024.parquet"]
"""dsr1_7b's inputs as local paths of a cluster that are not on this machine."""


def local_inputs(tmp_path, config: dict | None = None) -> list[str]:
    """Overrides pointing dsr1_7b's model and data at files that exist here (data files in their loaders' schemas;
    the model a whole folder of ``config``, by default dsr1_7b's, with sparse zero weights)."""
    from tests.launch.model_folders import write_model

    write_model(tmp_path / "model", config or HF_CONFIGS["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"], ["<unk>", "a"])
    (tmp_path / "train.parquet").write_bytes(parquet_bytes(DAPO_ROWS))
    (tmp_path / "aime.parquet").write_bytes(parquet_bytes(AIME_ROWS))
    return [f"model.path={tmp_path / 'model'}", f"task.train_path={tmp_path / 'train.parquet'}",
            f"task.val_path={tmp_path / 'aime.parquet'}"]


def test_a_slurm_dry_run_lists_the_inputs_it_cannot_find_here():
    prepared = prep("dsr1_7b", *CLUSTER_PATHS)
    assert prepared.missing_paths == [
        "model: model path /shared/models/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B has no config.json (a local HF "
        "checkpoint directory, or a hub id org/name, is needed)",
        "task: DAPO-Math file not found: /shared/data/DAPO-Math-17k/data/dapo-math-17k.parquet",
        "task: AIME 2024 file not found: /shared/data/AIME-2024/data/aime-2024.parquet",
    ]
    assert prepared.hub_inputs == []


def test_hub_ids_are_not_missing_paths_but_inputs_to_fetch():
    prepared = prep("dsr1_7b")
    assert prepared.missing_paths == []
    assert [line.split(":")[0] for line in prepared.hub_inputs] == [
        "model.path = deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "task.train_path = BytedTsinghua-SIA/DAPO-Math-17k",
        "task.val_path = BytedTsinghua-SIA/AIME-2024"]


def test_a_slurm_submission_needs_its_inputs_on_the_submitting_host():
    message = refusal("dsr1_7b", *CLUSTER_PATHS, dry_run=False)
    assert message == ("model: model path /shared/models/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B has no config.json "
                       "(a local HF checkpoint directory, or a hub id org/name, is needed) (and 2 more)")
    assert refusal("dsr1_7b", dry_run=False).startswith(  # the tests run offline, with an empty HF cache
        "model.path: deepseek-ai/DeepSeek-R1-Distill-Qwen-7B is not in the HF cache (")


def test_check_paths_false_leaves_them_to_the_job():
    prepared = prep("dsr1_7b", *CLUSTER_PATHS, "executor.check_paths=False", dry_run=False)
    assert len(prepared.missing_paths) == 3


def test_a_local_run_needs_its_inputs_here_in_a_dry_run_too():
    assert refusal("math_1b", "model.path=/shared/models/Qwen/Qwen2.5-1.5B", *CLUSTER_PATHS[1:],
                   executor="local").startswith(
        "model: model path /shared/models/Qwen/Qwen2.5-1.5B has no")
    assert refusal("math_1b", executor="local").startswith("model.path: Qwen/Qwen2.5-1.5B is not in the HF cache (")


def test_inputs_that_exist_pass_everywhere(tmp_path):
    inputs = local_inputs(tmp_path)
    assert prep("dsr1_7b", *inputs, dry_run=False).missing_paths == []
    assert prep("dsr1_7b", *inputs, executor="local").missing_paths == []


def test_the_job_checks_its_inputs_before_starting_the_trainer(tmp_path):
    experiment = fdl.build(prep("dsr1_7b", *CLUSTER_PATHS).cfg)
    with pytest.raises(ExperimentError, match=r"^model: model path .* \(and 2 more\)$"):
        experiment.run(tmp_path)


def test_gpus_come_from_the_executor():
    assert prep("dsr1_7b").experiment.gpus == 64
    assert prep("qwen2p5_1p5b_gsm8k").experiment.gpus == 8
    assert prep("tiny_cpu").experiment.gpus == 0


@pytest.mark.parametrize("overrides, message", [
    (["policy.data_parallel=24"], "policy: tensor 4 × context 1 × pipeline 1 × data_parallel 24 = 96 ranks, more "
                                  "than the 64 GPUs it can use; lower policy.data_parallel"),
    (["policy.parallel.context=2", "policy.data_parallel=8"],
     "policy.parallel: context=2: context parallelism is not supported (sequences are not split across "
     "context-parallel ranks, so the gradient would count every token 2 times); set context=1"),
    (["critic.recompute.method='sideways'"], "critic.recompute.granularity='full' needs recompute.method 'uniform' "
                                             "or 'block', got 'sideways'"),
    (["policy.parallel.tensor=16"], "policy.parallel.tensor=16 spans nodes: tensor parallelism must fit in one node "
                                    "of executor.gpus_per_node=8"),
    (["executor.gpus_per_node=4", "policy.parallel.tensor=8"], "policy.parallel.tensor=8 spans nodes"),
    (["generation.tensor_parallel_size=3"], "generation.num_engines=32 × generation.tensor_parallel_size=3 = 96 "
                                            "GPUs, more than the 64 it can use; lower generation.num_engines"),
    (["generation.tensor_parallel_size=3", "generation.num_engines=21", "allow_idle_gpus=True"],
     "generation.tensor_parallel_size=3 puts ranks 6-8 on nodes 0, 1: each group must fit in one node"),
    (["policy.data_parallel=8"], "policy uses 32 of the 64 GPUs it could train on, the rest idle while it works; set "
                                 "policy.data_parallel=16 (or allow_idle_gpus=True)"),
    (["generation.num_engines=8"], "generation.num_engines=8 × generation.tensor_parallel_size=2 uses 16 of the 64 "
                                   "GPUs, the rest idle while it generates; set generation.num_engines=32"),
    (["policy.micro_batch_tokens=4096"], "policy.micro_batch_tokens=4096 cannot hold one sample of up to "
                                         "generation.max_model_len=10240 tokens"),
    (["tag:MaxSequenceLength=16384"], "policy.micro_batch_tokens=10240 cannot hold one sample"),
    # sequence parallelism splits each micro-batch over the TP ranks, so widths are padded to a multiple of TP (4)
    (["generation.max_model_len=10241", "policy.micro_batch_tokens=10242", "critic.micro_batch_tokens=10242"],
     "policy.micro_batch_tokens=10242 cannot hold one sample of up to generation.max_model_len=10241 tokens padded "
     "to a multiple of 4 (policy.parallel.tensor=4 with sequence parallelism), 10244 tokens: set "
     "policy.micro_batch_tokens >= 10244"),
    (["policy.pad_to_multiple=3"], "policy.micro_batch_tokens=10240 cannot hold one sample of up to "
                                   "generation.max_model_len=10240 tokens padded to a multiple of 12 "
                                   "(policy.parallel.tensor=4 with sequence parallelism, policy.pad_to_multiple=3), "
                                   "10248 tokens: set policy.micro_batch_tokens >= 10248"),
    (["critic.pad_to_multiple=3"], "critic.micro_batch_tokens=10240 cannot hold one sample of up to "
                                   "generation.max_model_len=10240 tokens padded to a multiple of 3 "
                                   "(critic.pad_to_multiple=3), 10242 tokens: set critic.micro_batch_tokens >= 10242"),
    (["policy.pad_to_multiple=0"], "policy.pad_to_multiple must be >= 1 (or None), got 0"),
    (["reward_shaping.overlong_buffer=9000"], "reward_shaping.overlong_buffer=9000 must be in (0, "
                                              "generation.sampling.max_new_tokens=8192]"),
    (["trainer.generations_per_prompt=1"], "trainer.dynamic_sampling keeps prompt groups whose rewards differ"),
    (["policy.loss.is_correction=TIS"], "policy.loss: is_correction must be one of"),
    (["policy.loss.dual_clip_c=1.0"], "policy.loss: dual_clip_c must be > 1"),
    (["policy.loss.kl_kind=k4"], "policy.loss.kl_kind must be one of k1, k2, k3, k3+, got 'k4'"),
    (["trainer.kl_in_reward_coef=0.01"], "KL is on twice"),
    (["model.path=''"], "model: model path is empty"),
    (["task.val_path=''"], "task: task.val_path is empty: give the DAPO-Math file"),
])
def test_settings_that_cannot_run_are_refused_in_one_line(overrides, message):
    refused = refusal("dsr1_7b", *overrides)
    assert message in refused and "\n" not in refused


def test_padding_that_fits_the_budget_is_accepted():
    """A width that divides by TP already needs no room; a budget of the padded width is enough."""
    assert prep("dsr1_7b", "policy.pad_to_multiple=8").experiment.policy.sequence_multiple == 8
    padded = prep("dsr1_7b", "generation.max_model_len=10241", "policy.micro_batch_tokens=10244",
                  "critic.micro_batch_tokens=10242").experiment
    assert (padded.policy.sequence_multiple, padded.critic.sequence_multiple) == (4, 1)


def test_idle_gpus_are_accepted_when_the_recipe_says_so():
    prepared = prep("dsr1_7b", "policy.data_parallel=8", "allow_idle_gpus=True")
    assert prepared.experiment.placement_plan().gpus_used_line() == "GPUs used: 64 of 64"  # the critic uses them all
    prepared = prep("dsr1_7b", "policy.data_parallel=8", "critic.data_parallel=16", "generation.num_engines=16",
                    "allow_idle_gpus=True")
    assert prepared.experiment.placement_plan().gpus_used_line() == "GPUs used: 32 of 64"


@pytest.mark.parametrize("recipe, override, message", [
    ("tiny_cpu", "policy.parallel.tensor=3",
     "policy.parallel.tensor=3 does not divide the model's num_attention_heads=4"),
    ("tiny_cpu", "critic.parallel.tensor=4",
     "critic.parallel.tensor=4 does not divide the model's num_key_value_heads=2"),
    ("tiny_cpu", "generation.tensor_parallel_size=4",
     "generation.tensor_parallel_size=4 does not divide the model's num_key_value_heads=2"),
    ("tiny_cpu", "model.num_attention_heads=2", None),
])
def test_the_generated_model_shape_is_checked_against_tensor_parallelism(recipe, override, message):
    if message is None:
        prep(recipe, override, "policy.parallel.tensor=2")  # 2 heads, 2 KV heads, vocab 16, FFN 384: TP 2 fits
        return
    refused = refusal(recipe, override)
    assert message in refused and "\n" not in refused


def test_a_readable_config_json_is_checked_against_tensor_parallelism(tmp_path):
    local_inputs(tmp_path)
    model = tmp_path / "model"
    refused = refusal("dsr1_7b", f"model.path='{model}'", "policy.parallel.tensor=8", "policy.data_parallel=8")
    assert "policy.parallel.tensor=8 does not divide the model's num_attention_heads=28" in refused
    refused = refusal("dsr1_7b", f"model.path='{model}'", "critic.num_layers=29")
    assert "critic.num_layers=29 must be in [1, 28] (the layers of the backbone the critic starts from)" in refused


def test_layouts_are_not_checked_against_gpus_a_local_run_does_not_declare(tmp_path):
    prep("dsr1_7b", *local_inputs(tmp_path), "policy.data_parallel=3", executor="local")


def test_a_resume_path_follows_the_same_rule(tmp_path):
    """``trainer.resume=PATH`` is an input too: listed by a SLURM dry run, required here for a local run."""
    missing = "trainer: trainer.resume='/shared/runs/old/checkpoints/step_000100' is neither 'auto', 'never' nor"
    prepared = prep("dsr1_7b", "trainer.resume='/shared/runs/old/checkpoints/step_000100'")
    assert prepared.missing_paths[-1].startswith(missing)
    assert refusal("tiny_cpu", "trainer.resume='/shared/runs/old/checkpoints/step_000100'").startswith(missing)
    (tmp_path / "trainer_state.json").write_text("{}")  # a checkpoint step needs its Megatron checkpoints too
    assert refusal("tiny_cpu", f"trainer.resume='{tmp_path}'") == (
        f"trainer.resume: {tmp_path}/policy is not a Megatron distributed checkpoint (no readable metadata.json)")


@pytest.mark.parametrize("overrides, message", [
    (["policy.optimizer.lr=nan"], "config path 'policy.optimizer.lr' is nan: give a finite number"),
    (["policy.optimizer.lr=1e999"], "config path 'policy.optimizer.lr' is inf: give a finite number"),
    (["trainer.warm_start_lr=-1e999"], "config path 'trainer.warm_start_lr' is -inf: give a finite number"),
    (["critic.value_clip=-0.1"], "critic.value_clip must be > 0 (or None for an unclipped value loss), got -0.1"),
    (["policy.loss.is_cap=0.0"], "policy.loss.is_cap must be > 0, got 0.0"),
    (["seed=-1"], "config path 'seed' must be in [0, 2**32), got -1"),
    (["model.seed=4294967296"], "config path 'model.seed' must be in [0, 2**32), got 4294967296"),
    (["trainer.warm_start_seed=-3"], "config path 'trainer.warm_start_seed' must be in [0, 2**32), got -3"),
    (["trainer.kl_target=0.01"], "trainer.kl_target=0.01 adapts the reward-KL coefficient, but "
                                 "trainer.kl_in_reward_coef is 0"),
    (["trainer.short_batch='skip'"], "trainer.short_batch must be 'train' or 'fail', got 'skip'"),
    (["trainer.math_workers=0"], "trainer.math_workers must be >= 1, got 0"),
    (["policy.loss.is_low=3.0"], "policy.loss.is_low=3.0 must be in [0, is_cap=2.0]"),
    (["trainer.critic_epochs=0"], "trainer.critic_epochs must be >= 1 or None, got 0"),
    (["policy.loss.is_correction='tis'"], "policy.loss.is_correction='tis' corrects for the engine's logprobs "
                                          "differing from the policy's, but trainer.old_logprobs='engine' makes them "
                                          "the same: set is_correction=None, or old_logprobs='policy'"),
    (["trainer.old_logprobs='vllm'"], "trainer.old_logprobs must be one of 'policy', 'engine', got 'vllm'"),
    (["critic.num_layers=0"], "critic.num_layers=0 must be in [1, 3] (the layers of the backbone the critic starts "
                              "from)"),
    (["critic.num_layers=4"], "critic.num_layers=4 must be in [1, 3]"),
    (["trainer.critic_minibatches=3"], "trainer.critic_minibatches=3 does not divide the batch of 512 samples"),
    (["trainer.critic_minibatches=1024"], "trainer.critic_minibatches=1024 exceeds the batch of 512 samples"),
])
def test_values_the_run_would_reject_later_are_refused_now(overrides, message):
    refused = refusal("tiny_cpu", *overrides)
    assert "\n" not in refused
    if message is not None:
        assert message in refused


def tiny_with(estimator, **trainer) -> ExperimentError | None:
    """tiny_cpu's experiment with another estimator and trainer settings, validated."""
    from experiments import tiny_cpu

    cfg = tiny_cpu.config()
    tiny_cpu.grouped(cfg)  # 128 prompts × 4 answers, as the group estimators' fiddlers set it
    cfg.advantage = estimator
    for name, value in trainer.items():
        setattr(cfg.trainer, name, value)
    try:
        fdl.build(cfg).check()
    except ExperimentError as err:
        return err
    return None


def test_kl_in_the_reward_is_refused_for_estimators_that_ignore_token_rewards():
    from ppo.algorithms.estimators import GRPO, RLOO, RawReward, ReinforcePlusPlus

    for estimator in (RawReward, GRPO, RLOO):
        err = tiny_with(fdl.Config(estimator), kl_in_reward_coef=0.01)
        assert err is not None and f"trainer.kl_in_reward_coef=0.01 puts KL in the per-token rewards, which " \
            f"{estimator.__name__} ignores" in str(err)
    assert tiny_with(fdl.Config(ReinforcePlusPlus), kl_in_reward_coef=0.01) is None
    assert tiny_with(fdl.Config(GRPO)) is None


def test_group_baselines_need_more_than_one_generation_per_prompt():
    from ppo.algorithms.estimators import GRPO, RLOO, ReinforcePlusPlus

    for estimator in (fdl.Config(GRPO), fdl.Config(RLOO), fdl.Config(ReinforcePlusPlus, baseline=True)):
        err = tiny_with(estimator, generations_per_prompt=1, num_minibatches=1)
        assert err is not None and "compares each sample with the other samples of its prompt, so it needs " \
            "trainer.generations_per_prompt >= 2 (now 1)" in str(err)
    assert tiny_with(fdl.Config(ReinforcePlusPlus), generations_per_prompt=1, num_minibatches=1) is None


def test_a_local_run_plans_on_the_gpus_of_this_machine(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    refused = refusal("tiny_cpu")
    assert refused == ("policy uses 1 of the 2 GPUs it could train on, the rest idle while it works; set "
                       "policy.data_parallel=2 (or allow_idle_gpus=True)")
    plan = prep("tiny_cpu", "allow_idle_gpus=True").experiment.placement_plan()
    assert plan.gpus_used_line() == "GPUs used: 1 of 2"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert prep("tiny_cpu").experiment.placement_plan().cpu_only


def test_a_local_driver_on_a_bigger_ray_cluster_says_its_shape():
    refused = refusal("tiny_cpu", "executor.nodes=2", executor="local")
    assert refused == ("executor.nodes=2: a local driver on a Ray cluster of several nodes must say "
                       "executor.gpus_per_node")
    plan = prep("tiny_cpu", "executor.nodes=2", "executor.gpus_per_node=1", "allow_idle_gpus=True",
                executor="local").experiment.placement_plan()
    assert plan.gpus_used_line() == "GPUs used: 1 of 2"  # one rank per role, all on node 0


def test_whitening_token_rewards_is_refused_for_estimators_that_ignore_them():
    from experiments import tiny_cpu
    from ppo.algorithms.estimators import GRPO
    from ppo.loop.settings import RewardShaping

    cfg = tiny_cpu.config()
    tiny_cpu.grouped(cfg)
    cfg.advantage = fdl.Config(GRPO)
    cfg.reward_shaping = fdl.Config(RewardShaping, whiten_token_rewards=True)
    with pytest.raises(ExperimentError, match="reward_shaping.whiten_token_rewards whitens the per-token rewards, "
                                              "which GRPO ignores"):
        fdl.build(cfg).check()
    cfg.advantage = tiny_cpu.config().advantage
    fdl.build(cfg).check()


def test_char_credit_needs_one_token_per_character():
    assert refusal("tiny_gsm8k_cpu", "reward_shaping.char_credit=1.0") == (
        "reward_shaping.char_credit credits each answer character on its own token, which needs a task whose "
        "tokenizer writes one token per character (the arithmetic tasks), not GSM8KTaskSpec")
    assert refusal("tiny_cpu", "reward_shaping.char_credit=-1") == "reward_shaping.char_credit must be >= 0, got -1.0"
    prep("tiny_cpu", "reward_shaping.char_credit=0.5")
    prepare(Request("experiments/tiny_cpu.py", ["reward_shaping.char_credit=0.5"], fiddlers=["mixed_sizes"],
                    dry_run=True))


def test_the_critic_starts_from_an_hf_directory_or_a_checkpoint_step_and_nothing_else(tmp_path):
    wrong = tmp_path / "not_a_model"
    wrong.mkdir()
    assert refusal("tiny_cpu", f"critic.model_path='{wrong}'") == (
        f"critic.model_path: {wrong} is empty (an HF checkpoint folder holds config.json, safetensors weights and a "
        "tokenizer)")
    step = tmp_path / "run" / "checkpoints" / "step_000003"
    (step / "critic").mkdir(parents=True)
    (step / "trainer_state.json").write_text("{}")
    assert prep("tiny_cpu", f"critic.model_path='{step}'").missing_paths == []
    (wrong / "config.json").write_text("{}")  # an HF folder needs a model's config and weights too
    assert refusal("tiny_cpu", f"critic.model_path='{wrong}'") == (
        f"critic.model_path: {wrong}/config.json: model_type None is not supported; supported: qwen2, qwen3, llama")


def test_the_critic_moves_beside_the_policy_or_beside_generation_not_both():
    assert "set one of them" in refusal("tiny_cpu", "trainer.overlap_critic=True")
    assert prep("tiny_cpu", "trainer.overlap_critic=True", "trainer.critic_beside_generation=False")


def test_the_critic_trains_beside_generation_on_cpu_ranks_only():
    """The trainer asks the same function with the plan it places the workers by."""
    cpu = prep("tiny_cpu").experiment
    assert cpu.critic_trains_beside_generation(cpu.placement_plan())
    assert not cpu.critic_trains_beside_generation(cpu.placement_plan(nodes=1, gpus_per_node=1))
    off = prep("tiny_cpu", "trainer.critic_beside_generation=False").experiment
    assert not off.critic_trains_beside_generation(off.placement_plan())
    no_critic = prepare(Request("experiments/tiny_cpu.py", [], ["raw_reward"], dry_run=True)).experiment
    assert not no_critic.critic_trains_beside_generation(no_critic.placement_plan())


def test_a_model_the_workers_cannot_convert_is_refused_before_launch(tmp_path):
    """Where config.json can be read, an architecture the workers cannot convert stops the dry run in one line."""
    inputs = local_inputs(tmp_path)
    config = tmp_path / "model" / "config.json"
    config.write_text(json.dumps(HF_CONFIGS["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"] | {"model_type": "mistral"}))
    assert refusal("dsr1_7b", *inputs) == (f"model.path: {config}: model_type 'mistral' is not supported; "
                                           "supported: qwen2, qwen3, llama")


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}


@pytest.mark.parametrize("config", [
    {"model_type": "qwen3", "head_dim": 160, "attention_bias": False},  # q/k norms, heads wider than hidden / heads
    {"model_type": "llama", "rope_scaling": LLAMA3_ROPE, "rope_theta": 500000.0},  # Llama 3.1's config.json
    {"model_type": "llama", "rope_parameters": LLAMA3_ROPE | {"rope_theta": 500000.0}},  # as transformers 5 saves it
])
def test_qwen3_and_llama3_models_pass_the_dry_run(tmp_path, config):
    prep("dsr1_7b", *local_inputs(tmp_path, HF_CONFIGS["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"] | config))


@pytest.mark.parametrize("config, message", [
    ({"model_type": "mistral", "sliding_window": 4096},
     "model: model_type 'mistral' is not supported; supported: qwen2, qwen3, llama"),
    ({"model_type": "llama", "rope_scaling": LLAMA3_ROPE | {"rope_type": "yarn"}},
     "model: RoPE scaling 'yarn' is not supported (rope_type: default, llama3)"),
    ({"model_type": "llama", "rope_scaling": LLAMA3_ROPE | {"original_max_position_embeddings": 4096}},
     "model: RoPE scaling 'llama3' with original_max_position_embeddings=4096 is not supported: Megatron-Core "
     "computes llama3 RoPE with original_max_position_embeddings=8192 only"),
    ({"hidden_act": "gelu"}, "model: only SwiGLU (hidden_act='silu') is supported, got 'gelu'"),
    ({"model_type": "qwen3", "use_sliding_window": True},
     "model: use_sliding_window=True is not supported (full attention only)"),
])
def test_an_unsupported_architecture_is_refused_without_gpus_too(tmp_path, config, message):
    """A local CPU run (no GPU plan, so no memory plan) still reads config.json and refuses what cannot convert."""
    inputs = local_inputs(tmp_path)
    config_file = tmp_path / "model" / "config.json"
    config_file.write_text(json.dumps(HF_CONFIGS["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"] | config))
    assert refusal("dsr1_7b", *inputs, "executor.gpus_per_node=0", "policy.parallel.tensor=1",
                   "policy.parallel.sequence_parallel=False", "policy.data_parallel=1", "critic.parallel.tensor=1",
                   "critic.data_parallel=1", "generation.tensor_parallel_size=1", "generation.num_engines=1") == (
        message.replace("model: ", f"model.path: {config_file}: ", 1))
