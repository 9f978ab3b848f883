"""The CPU nightly suite: the embedded default as the README runs it, the same off-policy, and the GSM8K text path.

    .venv/bin/python analysis/nightly.py run nightly_suite.py --history nightly/
    .venv/bin/python analysis/dashboard.py nightly/ --out nightly/dashboard.html

Each experiment's own NIGHTLY checks judge its run (experiments/tiny_cpu.py: held-out accuracy ≥ 0.7 at step 150,
+0.3 over step 0, critic explained variance > 0 over the last 10 steps, token_mult_prob_error < 1.05). The
off-policy entry (trainer.max_staleness=1, issue 37's "done when") keeps the learning checks and asks that batches
trained one update after the weights that made them, never more; token_mult_prob_error is left out there, as it
measures that gap (behaviour against proximal), not a refit's error.
"""

TINY_CPU_OFF_POLICY_CHECKS = [
    'data["validation/accuracy"]["150"] >= 0.7',
    'data["validation/accuracy"]["150"] - data["validation/accuracy"]["0"] >= 0.3',
    'mean(data["train/critic/explained_var"], -10) > 0',
    'max(data["train/staleness_max"]) == 1',
]

SUITE = [
    {"experiment": "experiments/tiny_cpu.py", "timeout_s": 1800},
    {"experiment": "experiments/tiny_cpu.py", "name": "tiny_cpu_off_policy", "overrides": ["trainer.max_staleness=1"],
     "step": 150, "checks": TINY_CPU_OFF_POLICY_CHECKS, "timeout_s": 1800},
    {"experiment": "experiments/tiny_gsm8k_cpu.py", "timeout_s": 1200},
]
