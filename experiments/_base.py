"""The shared base of the GPU recipes: DAPO-style PPO with a critic on math (the reference's "ppo_math_1B").

``base_config(name, model, nodes=...)`` returns the whole graph; a recipe (``math_1b.py``, ``qwen2p5_1p5b_gsm8k.py``,
``dsr1_7b.py``) calls it and changes only what differs.  The values are that reference recipe's (the flattened result is
``tests/experiments/golden/math_1b.txt``):

- 32 prompts × 16 generations a step, 4 PPO epochs (one optimizer step each over the whole batch);
- GAE with λ 0.95, γ 1, advantages whitened; a critic with value-loss scale 0.4 and value clip 0.2;
- rewards {0, 1} → {−1, 1}, DAPO's overlong shaping with a 2048-token buffer, DAPO's dynamic sampling;
- no KL; clip 0.2 / 0.28 (DAPO's clip-higher), dual clip c = 10;
- learning rates 1e-6 (policy) and 2e-6 (critic); bfloat16 everywhere (the ``DType`` tag);
- Transformer Engine's layers for the policy and the critic (flash attention, no ``T × T`` mask; sequence
  parallelism when a recipe turns it on): the GPU install profile has it, and a worker without it stops in one line;
- 8192 new tokens in a 10240-token context (the ``MaxSequenceLength`` tag); micro-batches of up to 10240 tokens;
- DAPO-Math-17k for training, AIME 2024 for validation (greedy accuracy and avg@32); a SLURM job of whole 8-GPU
  nodes;
- every GPU at work, colocated: policy, critic and vLLM take turns on each GPU.  At the base's TP 1 that is
  ``data_parallel`` = ``num_engines`` = the job's GPUs; a recipe that raises a TP lowers the matching count
  (the dry run's ``GPUs used: U of N`` line and validation say when a layout leaves GPUs idle).

Models and data are named by their Hugging Face hub ids (``model.path = 'Qwen/Qwen2.5-1.5B'``,
``task.train_path = 'BytedTsinghua-SIA/DAPO-Math-17k:train'``).  A launch fetches them on the submitting host
before anything is queued — models into the HF cache (``HF_HOME``), datasets into ``PPO_DATA_ROOT`` as parquet
files — and the run's config names the local paths (``ppo/launch/fetch.py``); ``python launch.py prepare FILE``
fetches them ahead, and ``--dry-run`` says which are here and which a launch would fetch.  A local folder or file
works wherever an id does (``model.path=/lustre/models/Qwen2.5-1.5B``); a local path that is missing is listed by
the dry run, checked by a SLURM submission on the submitting host, and checked again by node 0 when the job starts.
"""

from __future__ import annotations

import fiddle as fdl

from ppo.algorithms.estimators import GAE
from ppo.config.tags import DType, MaxSequenceLength, Seed
from ppo.data.tasks import DAPOMathTaskSpec
from ppo.experiment import Experiment
from ppo.launch.executors import SlurmExecutor
from ppo.loop.settings import PPOSettings, RewardShaping
from ppo.models.optim import OptimizerSettings
from ppo.models.parallel import ParallelConfig
from ppo.models.sources import HFCheckpoint
from ppo.rollout.settings import SamplingConfig, VLLMGeneration
from ppo.workers.specs import MegatronCritic, MegatronPolicy, PolicyLoss

DAPO_MATH_17K = "BytedTsinghua-SIA/DAPO-Math-17k:train"
"""DAPO's training set on the hub (its one split; ``ppo.data.dapo`` reads its verl schema)."""
AIME_2024 = "BytedTsinghua-SIA/AIME-2024:train"
"""DAPO's AIME 2024 validation export (the 30 problems, each repeated 32 times, folded by ``ppo.data.aime``)."""

MAX_SEQUENCE = 10240
MAX_NEW_TOKENS = 8192

FUNCTIONAL_GATES = [
    'max(data["train/token_mult_prob_error"]) < 1.05',
    'max(data["train/clipfrac"]) < 0.2',
    '0.2 < min(data["train/probs_ratio_min"]) and max(data["train/probs_ratio_max"]) < 5',
    'max(data["train/critic/loss"]) < 6',
    'max(data["train/critic/grad_norm"]) < 150',
]
"""The nightly gates of every GPU recipe, each one a quantity that really goes wrong (tests/trainer/
test_gates_can_fail.py trips each with a fault): trainer and vLLM agree on logprobs (a stale refit or a wrong
logprob temperature breaks it), the policy moves little per step (clip fraction and the *unclamped* ratio's extremes:
a learning rate far too high breaks them), and the critic's loss and gradient norm stay bounded."""

KL_GATE = 'max(data["train/kl"]) < 0.1'
"""For recipes with a KL loss to the reference model: the policy stays near it."""


def _qwen2(hidden: int, ffn: int, heads: int, kv_heads: int, vocab: int, *, tied: bool, rope_theta: float,
           max_positions: int) -> dict:
    return {"model_type": "qwen2", "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": 28,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab,
            "tie_word_embeddings": tied, "rope_theta": rope_theta, "rms_norm_eps": 1e-6,
            "max_position_embeddings": max_positions, "hidden_act": "silu"}


HF_CONFIGS = {
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": _qwen2(3584, 18944, 28, 4, 152064, tied=False, rope_theta=10000.0,
                                                      max_positions=131072),
    "Qwen/Qwen2.5-1.5B": _qwen2(1536, 8960, 12, 2, 151936, tied=True, rope_theta=1000000.0, max_positions=131072),
    "Qwen/Qwen2.5-1.5B-Instruct": _qwen2(1536, 8960, 12, 2, 151936, tied=True, rope_theta=1000000.0,
                                         max_positions=32768),
}
"""The ``config.json`` fields of the recipes' models, as their hub pages publish them: where the checkpoint is not on
the submitting host, the dry run checks layouts and plans memory from these (the file wins where it can be read)."""


def base_config(name: str, model: str, *, nodes: int, gpus_per_node: int = 8) -> fdl.Config:
    """DAPO-style PPO on ``model`` (a hub id, ``org/name``) as a SLURM job of ``nodes × gpus_per_node`` GPUs."""
    dtype = "bfloat16"
    gpus = nodes * gpus_per_node
    return fdl.Config(
        Experiment,
        name=name,
        seed=Seed.new(0),
        model=fdl.Config(HFCheckpoint, path=model, config=HF_CONFIGS.get(model)),
        task=fdl.Config(DAPOMathTaskSpec, train_path=DAPO_MATH_17K, val_path=AIME_2024),
        policy=fdl.Config(
            MegatronPolicy,
            parallel=fdl.Config(ParallelConfig),
            data_parallel=gpus,
            optimizer=fdl.Config(OptimizerSettings, lr=1e-6, clip_grad=1.0),
            loss=fdl.Config(PolicyLoss, clip_low=0.2, clip_high=0.28, dual_clip_c=10.0),
            micro_batch_tokens=MAX_SEQUENCE,
            dtype=DType.new(dtype),
            transformer_impl="transformer_engine",
        ),
        critic=fdl.Config(
            MegatronCritic,
            parallel=fdl.Config(ParallelConfig),
            data_parallel=gpus,
            optimizer=fdl.Config(OptimizerSettings, lr=2e-6, clip_grad=1.0),
            value_clip=0.2,
            value_loss_scale=0.4,
            micro_batch_tokens=MAX_SEQUENCE,
            dtype=DType.new(dtype),
            transformer_impl="transformer_engine",
        ),
        generation=fdl.Config(
            VLLMGeneration,
            model_path="",  # the run's initial model (model.path)
            num_engines=gpus,
            dtype=DType.new(dtype),
            max_model_len=MaxSequenceLength.new(MAX_SEQUENCE),
            seed=Seed.new(0),
            sampling=fdl.Config(SamplingConfig, temperature=1.0, top_p=1.0, max_new_tokens=MAX_NEW_TOKENS),
        ),
        advantage=fdl.Config(GAE, gamma=1.0, lam=0.95, whiten_advantages=True),
        reward_shaping=fdl.Config(RewardShaping, scale=True, source_min=0.0, source_max=1.0, target_min=-1.0,
                                  target_max=1.0, overlong_buffer=2048, overlong_penalty=1.0),
        trainer=fdl.Config(
            PPOSettings,
            max_steps=500,
            prompts_per_step=32,
            generations_per_prompt=16,
            ppo_epochs=4,
            num_minibatches=1,
            val_period=10,
            val_samples=32,  # AIME's 30 problems: avg@32 as DAPO reports it, beside greedy accuracy
            checkpoint_period=10,
            dynamic_sampling=True,
            max_gen_batches=3,
        ),
        executor=fdl.Config(SlurmExecutor, nodes=nodes, gpus_per_node=gpus_per_node, time_minutes=240,
                            additional_parameters={"exclusive": True}),
    )
