"""A model-based search on the embedded CPU recipe (``experiments/tiny_cpu.py``): TPE chooses λ_value, λ_policy and
the two clip ratios, 8 configurations of 12 steps, 2 at a time.

The search runs here end to end: each configuration is asked of an Optuna study (its journal file in the sweep
directory) when a slot frees, from every result so far; the median rule at step 6 prunes the poor ones in the
study too; killing the driver and running the command again continues the same study; the report ranks the
hyperparameters by importance (PED-ANOVA).  Twelve steps say little about λ: this is the machinery at CPU scale, a
real search needs the 150 steps of the recipe (or a GPU recipe).

    python launch.py sweeps/tiny_cpu_search.py --dry-run
    python launch.py sweeps/tiny_cpu_search.py                    # runs/sweeps/tiny_cpu_search; again: resume
    python analysis/sweep_report.py runs/sweeps/tiny_cpu_search
"""

from ppo.sweep import Divergence, EarlyStopping, MedianStopping, Search, Sweep, Uniform

SWEEP = Sweep(
    base="experiments/tiny_cpu.py",
    search=Search({"advantage.lam_value": Uniform(0.9, 1.0), "advantage.lam_policy": Uniform(0.9, 1.0),
                   "policy.loss.clip_low": Uniform(0.1, 0.3), "policy.loss.clip_high": Uniform(0.1, 0.4)},
                  n_trials=8, sampler="tpe", seed=0),
    overrides=["trainer.max_steps=12", "trainer.checkpoint_period=4"],
    metric="validation/accuracy", mode="max", step=12,
    stopping=EarlyStopping(
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.2)}),
        rule=MedianStopping(rungs=[6], min_trials=3, metric="train/reward"),
    ),
    max_parallel=2,
    poll_s=10,
)
