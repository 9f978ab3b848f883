"""The CPU nightly suite: the embedded default as the README runs it, and the GSM8K text path.

    .venv/bin/python analysis/nightly.py run nightly_suite.py --history nightly/
    .venv/bin/python analysis/dashboard.py nightly/ --out nightly/dashboard.html

Each experiment's own NIGHTLY checks judge its run (experiments/tiny_cpu.py: held-out accuracy ≥ 0.7 at step 150,
+0.3 over step 0, critic explained variance > 0 over the last 10 steps, token_mult_prob_error < 1.05).
"""

SUITE = [
    {"experiment": "experiments/tiny_cpu.py", "timeout_s": 1800},
    {"experiment": "experiments/tiny_gsm8k_cpu.py", "timeout_s": 1200},
]
