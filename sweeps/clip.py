"""PPO's clip range and dual clip, on the DAPO-style math recipe (``experiments/math_1b.py``: clip 0.2 / 0.28, c = 10).

Clip-low and clip-high move together as pairs (symmetric 0.2, DAPO's clip-higher 0.28 and a wider 0.35, a tighter
0.1 / 0.14), crossed with the dual clip c (off, 3, 10).  4 pairs × 3 × 2 seeds = 24 trials of 1 node × 8 GPUs,
200 steps each.  The base's functional gates on the clamped ratio assume clip 0.2 / 0.28, so they are not used
here; the probability error between trainer and vLLM is a divergence bound instead.

    python launch.py sweeps/clip.py --dry-run
"""

from ppo.sweep import Budget, Divergence, EarlyStopping, Grid, MedianStopping, Sweep, Tied

SWEEP = Sweep(
    base="experiments/math_1b.py",
    axes=[
        Tied({"policy.loss.clip_low": [0.1, 0.2, 0.2, 0.2], "policy.loss.clip_high": [0.14, 0.2, 0.28, 0.35]}),
        Grid({"policy.loss.dual_clip_c": [None, 3.0, 10.0]}),
    ],
    seeds=[0, 1],
    overrides=["trainer.max_steps=200"],
    metric="validation/accuracy", mode="max", step=200,
    stopping=EarlyStopping(
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/grad_norm", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.1)}),
        rule=MedianStopping(rungs=[50, 100], min_trials=4, metric="train/reward"),
    ),
    budget=Budget(max_trials=24, max_gpu_hours=24 * 8 * 4),
    max_parallel=8,
    poll_s=60,
)
