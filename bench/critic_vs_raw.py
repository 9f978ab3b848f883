"""Does the critic earn its keep?  The default (PPO + GAE) against the same recipe without a critic, over seeds.

    .venv/bin/python bench/critic_vs_raw.py                          # seeds 0 1 2, 150 steps: about 35 minutes
    .venv/bin/python bench/critic_vs_raw.py --seeds 0 --steps 10     # a smoke test (about 3 minutes)
    .venv/bin/python bench/critic_vs_raw.py --keep runs/critic_vs_raw task.digits=2   # overrides for every run
    .venv/bin/python bench/critic_vs_raw.py --fiddler mixed_sizes    # fiddlers for both recipes

For each seed, one after the other on this machine: ``python launch.py experiments/tiny_cpu.py seed=S`` (PPO with
the learned critic and GAE) and the same with ``--fiddler raw_reward`` (no critic; the batch-whitened final reward
as every token's advantage), each in a fresh process through the launcher, as a user runs them.  Interleaving the
two recipes seed by seed keeps a machine that slows down over the hour from favouring either.  The table has, per
run: held-out accuracy at step 0 and at the last step, the first step whose held-out accuracy is >= 0.7, warm start +
RL seconds until then (validation not included: the two recipes validate alike), the median RL step, the critic's
explained variance averaged over the last 10 steps, and the run's wall time; then each recipe's mean over seeds.

Issue 14's bar: the critic's explained variance >= 0.3, and PPO + GAE at 0.7 in less wall time than raw reward.
Results are kept in ``--keep`` (default: a new temporary directory): ``<recipe>-seed<S>/`` run directories and
``results.json``; running again with the same ``--keep`` reuses the finished runs and runs the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runs import first_step_at, fmt, print_table, run_result, seconds_to  # bench/ is the first sys.path entry
from timing import wait_until_quiet

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "experiments/tiny_cpu.py"
RECIPES = {"ppo_gae": [], "raw_reward": ["--fiddler", "raw_reward"]}
TARGET_ACCURACY = 0.7
LAST_STEPS = 10


def launch(recipe: str, seed: int, args, run_dir: Path) -> float:
    """One run through ``launch.py``, its output streamed; returns its wall seconds."""
    fiddlers = [part for name in args.fiddler for part in ("--fiddler", name)]
    command = [sys.executable, str(ROOT / "launch.py"), EXPERIMENT, *fiddlers, *RECIPES[recipe], f"seed={seed}",
               f"trainer.max_steps={args.steps}", "trainer.wandb_mode=disabled", *args.overrides,
               "--run-dir", str(run_dir)]
    print(f"[critic_vs_raw] {recipe}, seed {seed}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    status = subprocess.run(command, cwd=ROOT).returncode
    if status:
        raise SystemExit(f"critic_vs_raw: {recipe} seed {seed} failed (exit status {status}); its output is above "
                         f"and its run directory is {run_dir}")
    return time.perf_counter() - started


def summary(result: dict) -> dict:
    accuracy = {step: acc for step, acc, _ in result["validations"]}
    explained = result["explained_var"][-LAST_STEPS:]
    return {
        "acc_first": accuracy.get(0), "acc_last": accuracy[max(accuracy)], "last_step": max(accuracy),
        "reached": first_step_at(result, TARGET_ACCURACY),
        "seconds_to": seconds_to(result, TARGET_ACCURACY, result["warm_start_seconds"]),
        "step_s": statistics.median(result["step_seconds"]),
        "explained_var": statistics.mean(explained) if explained else None,
    }


def mean_or_none(values: list) -> float | None:
    return None if not values or any(v is None for v in values) else statistics.mean(values)


def report(results: dict, seeds: list[int]) -> None:
    header = ["recipe", "seed", "val acc first → last", f"first step >= {TARGET_ACCURACY}",
              f"s to {TARGET_ACCURACY}", "s/step (median)", f"explained var (last {LAST_STEPS})", "wall s"]
    rows = []
    for recipe in RECIPES:
        runs = [results[f"{recipe}-seed{seed}"] for seed in seeds]
        for seed, run in zip(seeds, runs):
            s = run["summary"]
            rows.append([recipe, str(seed), f"{s['acc_first']:.3f} → {s['acc_last']:.3f}", fmt(s["reached"], "{}"),
                         fmt(s["seconds_to"], "{:.0f}"), f"{s['step_s']:.2f}", fmt(s["explained_var"], "{:+.3f}"),
                         f"{run['wall']:.0f}"])
        means = {key: mean_or_none([run["summary"][key] for run in runs]) for key in
                 ("acc_last", "reached", "seconds_to", "step_s", "explained_var")}
        rows.append([recipe, "mean", f"→ {means['acc_last']:.3f}", fmt(means["reached"], "{:.0f}"),
                     fmt(means["seconds_to"], "{:.0f}"), f"{means['step_s']:.2f}",
                     fmt(means["explained_var"], "{:+.3f}"), f"{statistics.mean(run['wall'] for run in runs):.0f}"])
    print(f"\n{len(seeds)} seed(s), {os.cpu_count()} CPU cores; seconds on this machine "
          f"('—': never reached {TARGET_ACCURACY}, so no mean)")
    print_table(header, rows)
    ppo = [results[f"ppo_gae-seed{seed}"]["summary"] for seed in seeds]
    raw = [results[f"raw_reward-seed{seed}"]["summary"] for seed in seeds]
    faster = sum(p["seconds_to"] is not None and (r["seconds_to"] is None or p["seconds_to"] < r["seconds_to"])
                 for p, r in zip(ppo, raw))
    explained = mean_or_none([p["explained_var"] for p in ppo])
    print(f"\nPPO + GAE reached {TARGET_ACCURACY} sooner than raw reward in {faster} of {len(seeds)} seed(s); "
          f"the critic's explained variance (mean over seeds) {fmt(explained, '{:+.3f}')} (bar: 0.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--keep", help="working directory (default: a new temporary one)")
    parser.add_argument("--fiddler", action="append", default=[],
                        help="a fiddler of the experiment for both recipes (repeatable), e.g. mixed_sizes")
    parser.add_argument("overrides", nargs="*", help="path=value overrides for every run")
    args = parser.parse_args()
    workdir = Path(args.keep or tempfile.mkdtemp(prefix="critic-vs-raw-"))
    workdir.mkdir(parents=True, exist_ok=True)
    record, settings = workdir / "results.json", workdir / "settings.json"
    wanted = {"steps": args.steps, "overrides": args.overrides, **({"fiddlers": args.fiddler} if args.fiddler else {})}
    if settings.exists() and json.loads(settings.read_text()) != wanted:
        raise SystemExit(f"critic_vs_raw: {workdir} holds runs of other settings ({settings.read_text().strip()}); "
                         f"give a new --keep")
    settings.write_text(json.dumps(wanted))
    results = json.loads(record.read_text()) if record.exists() else {}
    print(f"[critic_vs_raw] working in {workdir}", flush=True)
    for seed in args.seeds:
        for recipe in RECIPES:
            name = f"{recipe}-seed{seed}"
            if name in results:
                print(f"[critic_vs_raw] {name}: finished earlier, reused", flush=True)
                continue
            run_dir = workdir / name
            if run_dir.exists():
                raise SystemExit(f"critic_vs_raw: {run_dir} holds an unfinished run; remove it or give a new --keep")
            wait_until_quiet()  # the previous run's Ray processes finish exiting first
            wall = launch(recipe, seed, args, run_dir)
            result = run_result(run_dir)
            results[name] = {"wall": wall, "summary": summary(result), "result": result}
            record.write_text(json.dumps(results, indent=1))
    report(results, args.seeds)


if __name__ == "__main__":
    main()
