"""λ_value × λ_policy of PPO's decoupled GAE, on Qwen2.5-1.5B-Instruct / GSM8K (``experiments/qwen2p5_1p5b_gsm8k.py``).

The critic's returns come from the λ_value run of GAE, the policy's advantages from the λ_policy run (VAPO's
decoupling; the recipe itself uses λ_value = 1 with the length-adaptive λ_policy).  The length-adaptive λ is turned
off here (``advantage.length_adaptive_alpha=0.0``), otherwise it would replace λ_policy.  3 × 4 values × 2 seeds =
24 trials of 1 node × 8 GPUs, 100 steps each; 8 at a time.

    python launch.py sweeps/gae_lambda.py --dry-run                  # the 24 trials, their differences, the array
    python launch.py sweeps/gae_lambda.py executor.partition=gpu     # submit (again: resume)
    python analysis/sweep_report.py runs/sweeps/gae_lambda           # the results table and page
"""

from ppo.sweep import Budget, Divergence, EarlyStopping, Grid, MedianStopping, Sweep

SWEEP = Sweep(
    base="experiments/qwen2p5_1p5b_gsm8k.py",
    axes=[Grid({"advantage.lam_value": [0.95, 0.99, 1.0], "advantage.lam_policy": [0.9, 0.95, 0.99, 1.0]})],
    seeds=[0, 1],
    overrides=["advantage.length_adaptive_alpha=0.0", "trainer.max_steps=100"],
    metric="validation/accuracy", mode="max", step=100,
    stopping=EarlyStopping(
        # learning at all: the reference reaches ~0.5 train reward by step 20 on this recipe
        gates=['data["train/reward"]["20"] > 0.1'],
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/grad_norm", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.1)}),
        rule=MedianStopping(rungs=[40, 70], min_trials=4),
    ),
    budget=Budget(max_trials=24, max_gpu_hours=24 * 8 * 4),
    max_parallel=8,
    poll_s=60,
)
