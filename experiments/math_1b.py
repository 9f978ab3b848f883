"""DAPO-style PPO with a critic on math: Qwen2.5-1.5B (base) on DAPO-Math-17k, AIME 2024 validation, 1 node × 8 GPUs.

The reference's "ppo_math_1B" and the base every GPU recipe derives from (``experiments/_base.py`` has the values):
no KL, clip 0.2 / 0.28 with dual clip c = 10, rewards scaled to {−1, 1}, overlong shaping, dynamic sampling.
On the node's 8 GPUs: 8 policy and 8 critic replicas (TP 1) and 8 vLLM engines, colocated.

    python launch.py experiments/math_1b.py --dry-run                        # config, plan, sbatch script
    python launch.py prepare experiments/math_1b.py                          # fetch the model and data
    python launch.py experiments/math_1b.py model.path=/lustre/models/Qwen2.5-1.5B executor.partition=gpu
"""

import fiddle as fdl

from experiments._base import FUNCTIONAL_GATES, base_config

NIGHTLY = {"step": 40, "checks": FUNCTIONAL_GATES}


def config() -> fdl.Config:
    return base_config("math_1b", "Qwen/Qwen2.5-1.5B", nodes=1)
