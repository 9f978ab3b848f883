"""The length-adaptive λ's α (VAPO: λ_policy = 1 − 1/(α·length)), on Qwen2.5-1.5B-Instruct / GSM8K.

α = 0 is plain GAE with λ_policy = λ (1.0 in the recipe); the recipe's own value is 0.05.  6 values × 3 seeds = 18
trials of 1 node × 8 GPUs, 100 steps each, judged by asynchronous successive halving at steps 30 and 60.

    python launch.py sweeps/length_adaptive_alpha.py --dry-run
"""

from ppo.sweep import Budget, Divergence, EarlyStopping, Grid, SuccessiveHalving, Sweep

SWEEP = Sweep(
    base="experiments/qwen2p5_1p5b_gsm8k.py",
    axes=[Grid({"advantage.length_adaptive_alpha": [0.0, 0.01, 0.02, 0.05, 0.1, 0.2]})],
    seeds=[0, 1, 2],
    overrides=["trainer.max_steps=100"],
    metric="validation/accuracy", mode="max", step=100,
    stopping=EarlyStopping(
        gates=['data["train/reward"]["20"] > 0.1'],
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/grad_norm", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.1)}),
        rule=SuccessiveHalving(rungs=[30, 60], eta=2, min_trials=4),
    ),
    budget=Budget(max_trials=18, max_gpu_hours=18 * 8 * 4),
    max_parallel=6,
    poll_s=60,
)
