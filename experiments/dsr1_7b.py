"""PPO with a critic on long reasoning: DeepSeek-R1-Distill-Qwen-7B on DAPO-Math-17k, AIME 2024 validation, 8 × 8 GPUs.

What differs from the base (``experiments/_base.py``), as the reference runs it:

- a KL penalty to the reference policy of 0.001 as a loss term (k3; the reference model's logprobs are computed);
- truncated importance sampling against the inference engine's logprobs (``tis``, cap 5);
- GAE with λ = 1 (γ = 1);
- the policy on TP 4 with sequence parallelism (16 replicas), the critic on TP 2 (32 replicas), 32 vLLM engines on
  TP 2: all 64 GPUs, each shared by a policy rank, a critic rank and an engine rank.  (The reference runs the policy
  on TP 4 × CP 2 × 8 replicas; context parallelism is refused here until the workers split sequences across CP
  ranks, so the second half of each CP pair becomes another data-parallel replica.)
- full activation recomputation, every layer, for the policy and the critic: a 10k-token micro-batch's activations
  do not fit otherwise;
- 8 nodes × 8 GPUs, requeued past the 4-hour time limit (up to 12 times) and resumed from the latest checkpoint.

Sequences as in the base: 8192 new tokens in a 10240-token context.

    python launch.py experiments/dsr1_7b.py --dry-run                              # the exact sbatch script
    python launch.py experiments/dsr1_7b.py policy.optimizer.lr=5e-7 executor.partition=gpu
"""

import fiddle as fdl

from experiments._base import FUNCTIONAL_GATES, KL_GATE, base_config
from ppo.models.recompute import Recompute

NIGHTLY = {
    "step": 40,
    "checks": [
        'data["train/reward"]["40"] > 0.3',
        'data["validation/accuracy"]["40"] > 0.4',
        *FUNCTIONAL_GATES,
        KL_GATE,
    ],
}


def config() -> fdl.Config:
    cfg = base_config("dsr1_7b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", nodes=8)
    # KL to the reference policy as a loss term; truncated IS against vLLM's logprobs
    cfg.policy.loss.kl_coef = 0.001
    cfg.policy.loss.kl_kind = "k3"
    cfg.policy.loss.is_correction = "tis"
    cfg.policy.loss.is_cap = 5.0
    # GAE with λ = 1
    cfg.advantage.lam = 1.0
    # layouts on 64 GPUs: policy TP 4 with sequence parallelism × 16 replicas, critic TP 2 × 32 replicas,
    # 32 vLLM engines of TP 2
    cfg.policy.parallel.tensor = 4
    cfg.policy.parallel.sequence_parallel = True
    cfg.policy.data_parallel = 16
    cfg.critic.parallel.tensor = 2
    cfg.critic.data_parallel = 32
    cfg.generation.tensor_parallel_size = 2
    cfg.generation.num_engines = 32
    # 10k-token sequences: recompute every layer in backward instead of keeping its activations
    cfg.policy.recompute = fdl.Config(Recompute, granularity="full", method="uniform", num_layers=1)
    cfg.critic.recompute = fdl.Config(Recompute, granularity="full", method="uniform", num_layers=1)
    # a long run: requeued past the time limit and resumed from the latest checkpoint
    cfg.executor.max_requeues = 12
    return cfg


def asynchronous(cfg: fdl.Config) -> None:
    """Fiddler: generation that never waits (``trainer.max_staleness=1``, README "``ppo.loop``: who waits for whom"):
    16 engines (TP 2) on 32 GPUs of their own, the policy (TP 4 × 8 replicas) and the critic (TP 2 × 16) on the
    other 32; every GPU still at work.  ``--dry-run`` prints the split and its memory plan."""
    cfg.colocated = False
    cfg.generation.num_engines = 16
    cfg.policy.data_parallel = 8
    cfg.critic.data_parallel = 16
    cfg.trainer.max_staleness = 1
