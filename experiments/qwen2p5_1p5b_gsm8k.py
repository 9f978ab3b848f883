"""PPO with VAPO's decoupled GAE: Qwen2.5-1.5B-Instruct on GSM8K, 1 node × 8 GPUs.

What differs from the base (``experiments/_base.py``), as the reference runs it:

- 1024 prompts × 1 generation a step, 1 PPO epoch; plain {0, 1} rewards (no scaling, no overlong shaping, no
  dynamic sampling, which needs several generations per prompt);
- VAPO's GAE: the critic's returns with λ_value = 1.0, the advantages with the length-adaptive
  λ_policy = 1 − 1/(0.05·length); γ = 1;
- clip 0.2 / 0.2 with dual clip c = 3; the critic's value-loss scale 1.0, value clip 0.5, lr 1e-5;
- 512 new tokens in a 1024-token context; the policy on TP 2 with sequence parallelism (the reference's CP 2 is
  refused here: the workers do not split sequences across CP ranks), the critic on TP 2;
- the instruct model's chat template around the question and a step-by-step, boxed-answer instruction.

    python launch.py experiments/qwen2p5_1p5b_gsm8k.py --dry-run
"""

import fiddle as fdl

from experiments._base import FUNCTIONAL_GATES, base_config
from ppo.config.overrides import set_tag
from ppo.config.tags import MaxSequenceLength
from ppo.data.tasks import GSM8KTaskSpec

NIGHTLY = {
    "step": 40,
    "checks": [
        'data["train/reward"]["40"] > 0.75',
        'data["validation/accuracy"]["40"] > 0.65',
        *FUNCTIONAL_GATES,
    ],
}


def config() -> fdl.Config:
    cfg = base_config("qwen2p5_1p5b_gsm8k", "Qwen/Qwen2.5-1.5B-Instruct", nodes=1)
    # data: GSM8K in the instruct model's chat template; validation on the whole test split
    cfg.task = fdl.Config(
        GSM8KTaskSpec,
        train_path="openai/gsm8k:main:train",
        test_path="openai/gsm8k:main:test",
        val_size=1319,
        template_text="{prompt}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
        use_chat_template=True,
    )
    # batch: 1024 prompts × 1 generation, 1 epoch; plain {0, 1} rewards
    cfg.trainer.prompts_per_step = 1024
    cfg.trainer.generations_per_prompt = 1
    cfg.trainer.ppo_epochs = 1
    cfg.trainer.max_steps = 100
    cfg.trainer.dynamic_sampling = False
    cfg.trainer.val_samples = 0  # 1319 test problems: greedy accuracy is precise enough without sampled answers
    cfg.reward_shaping.scale = False
    cfg.reward_shaping.overlong_buffer = None
    # VAPO's decoupled GAE: returns with λ_value = 1, advantages with the length-adaptive λ_policy
    cfg.advantage.lam = 1.0
    cfg.advantage.lam_value = 1.0
    cfg.advantage.length_adaptive_alpha = 0.05
    # losses: symmetric clip with dual clip c = 3; the critic's loss at full scale, value clip 0.5, lr 1e-5
    cfg.policy.loss.clip_high = 0.2
    cfg.policy.loss.dual_clip_c = 3.0
    cfg.critic.value_loss_scale = 1.0
    cfg.critic.value_clip = 0.5
    cfg.critic.optimizer.lr = 1e-5
    # layouts on the node's 8 GPUs: policy TP 2 with sequence parallelism (4 replicas), critic TP 2 (4 replicas),
    # 8 vLLM engines of one GPU each
    cfg.policy.parallel.tensor = 2
    cfg.policy.parallel.sequence_parallel = True
    cfg.policy.data_parallel = 4
    cfg.critic.parallel.tensor = 2
    cfg.critic.data_parallel = 4
    # sequences: 512 new tokens in a 1024-token context
    set_tag(cfg, MaxSequenceLength, 1024)
    cfg.generation.sampling.max_new_tokens = 512
    return cfg
