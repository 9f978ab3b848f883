"""The GPU nightly suite: the three GPU recipes, each stopped at its NIGHTLY step and judged by its gates, on SLURM.

    .venv/bin/python analysis/nightly.py run nightly_suite_gpu.py --executor slurm \\
        --history $SHARED/nightly --runs-dir $SHARED/runs/nightly --only math_1b --only qwen2p5_1p5b_gsm8k
    .venv/bin/python analysis/dashboard.py $SHARED/nightly --out $SHARED/nightly/dashboard.html

docs/nightly.md section 3 schedules it (a scrontab line and a cron line): the two 1-node recipes every night, the
8-node dsr1_7b once a week (--only dsr1_7b), since the runner follows one entry at a time.

Each experiment's own NIGHTLY judges its run (experiments/_base.py FUNCTIONAL_GATES: trainer and vLLM agree on
logprobs, the policy moves little per step, the critic's loss and gradient norm stay bounded; plus reward and
held-out accuracy at step 40 where the recipe declares them, and dsr1_7b's KL gate). ``trainer.max_steps`` stops each
run at the step its checks read. A timeout counts from the submission, so it covers the queue wait as well as the
run; past it the job is cancelled and the night is INFRA-FAIL.
"""

HOUR = 3600

SUITE = [
    {"experiment": "experiments/math_1b.py", "overrides": ["trainer.max_steps=40"], "timeout_s": 8 * HOUR},
    {"experiment": "experiments/qwen2p5_1p5b_gsm8k.py", "overrides": ["trainer.max_steps=40"], "timeout_s": 4 * HOUR},
    {"experiment": "experiments/dsr1_7b.py", "overrides": ["trainer.max_steps=40"], "timeout_s": 24 * HOUR},
]
