"""GAE's λ on the embedded CPU recipe (``experiments/tiny_cpu.py``): 3 values × 2 seeds, 30 steps each, one at a time.

A sweep that runs here, in minutes per trial, end to end: trials as local processes, early stopping on divergence
and by the median rule at step 20, the report and the best configuration as an experiment file.

    python launch.py sweeps/tiny_cpu_lambda.py --dry-run
    python launch.py sweeps/tiny_cpu_lambda.py                    # runs/sweeps/tiny_cpu_lambda; again: resume
    python analysis/sweep_report.py runs/sweeps/tiny_cpu_lambda --export-best experiments/tiny_cpu_best.py
"""

from ppo.sweep import Divergence, EarlyStopping, Grid, MedianStopping, Sweep

SWEEP = Sweep(
    base="experiments/tiny_cpu.py",
    axes=[Grid({"advantage.lam": [0.9, 0.95, 1.0]})],
    seeds=[0, 1],
    overrides=["trainer.max_steps=30", "trainer.checkpoint_period=10"],
    metric="validation/accuracy", mode="max", step=30,
    stopping=EarlyStopping(
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.2)}),
        rule=MedianStopping(rungs=[20], min_trials=3),
    ),
    max_parallel=1,
    poll_s=10,
)
