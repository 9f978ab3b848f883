"""A model-based search on Qwen2.5-1.5B-Instruct / GSM8K (``experiments/qwen2p5_1p5b_gsm8k.py``): TPE chooses GAE's
λ_value, the two clip ratios and the length-adaptive α of λ_policy together, 24 configurations of 100 steps.

On SLURM the search is one job array of 24 elements, 8 at a time (1 node × 8 GPUs each): every element asks the
study (``study.journal`` in the sweep directory, on the shared filesystem) for its configuration when it starts,
from every result told so far by any element, and tells it the result (``ppo/sweep/slurm_search.py``).  The recipe's
own point (λ_value 1.0, clip 0.2 / 0.2, α 0.05) lies inside the space.  α > 0 replaces λ_policy with the
length-adaptive λ (VAPO: 1 − 1/(α·length)), so λ_policy itself is not searched; ``sweeps/gae_lambda.py`` grids
λ_value × λ_policy with α off.  One seed per configuration: a search spends its budget on configurations and the
report's importance table says which knob mattered; re-run the best few with ``Points`` and several seeds.

    python launch.py sweeps/qwen2p5_1p5b_gsm8k_search.py --dry-run              # the space, each bound validated
    python launch.py sweeps/qwen2p5_1p5b_gsm8k_search.py executor.partition=gpu  # submit (again: follow / resume)
    python analysis/sweep_report.py runs/sweeps/qwen2p5_1p5b_gsm8k_search        # ranking, importance, history
"""

from ppo.sweep import Budget, Divergence, EarlyStopping, LogUniform, Search, SuccessiveHalving, Sweep, Uniform

SWEEP = Sweep(
    base="experiments/qwen2p5_1p5b_gsm8k.py",
    search=Search({"advantage.lam_value": Uniform(0.9, 1.0),
                   "policy.loss.clip_low": Uniform(0.1, 0.3), "policy.loss.clip_high": Uniform(0.15, 0.4),
                   "advantage.length_adaptive_alpha": LogUniform(0.01, 0.2)},
                  n_trials=24, sampler="tpe", seed=0),
    overrides=["trainer.max_steps=100"],
    metric="validation/accuracy", mode="max", step=100,
    stopping=EarlyStopping(
        gates=['data["train/reward"]["20"] > 0.1'],
        divergence=Divergence(non_finite=["train/loss", "train/critic/loss", "train/grad_norm", "train/reward"],
                              bounds={"train/token_mult_prob_error": (None, 1.1)}),
        rule=SuccessiveHalving(rungs=[30, 60], eta=2, min_trials=4),
    ),
    budget=Budget(max_gpu_hours=24 * 8 * 4),  # 24 trials x 8 GPUs x the recipe's 4-hour limit
    max_parallel=8,
    poll_s=60,
)
