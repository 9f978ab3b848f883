"""A recipe's baseline band: the same recipe run with N seeds, reduced per step to mean, std, min and max.

``nightly.py baseline RECIPE --seeds N`` launches the recipe N times with the override ``seed=<i>`` (i = 0..N-1,
replacing any ``seed=`` override of the suite entry), each into a fresh ``RUNS/baseline/<recipe>/seed-<i>``
(``seed-<i>-2`` when rerun, so no run resumes an old one's checkpoint), then stores
the band of :data:`~ppo.nightly.history.KEY_METRICS` and the metrics the recipe's checks read as
``HISTORY/baselines/<recipe>.json``. The dashboard draws tonight's curves over it.

Only runs whose launch exited 0 and left a readable log enter the band; the others are listed in the baseline's
``runs`` with ``"used": false``. A step enters a metric's band when at least one used run logged it; ``n`` says how
many did, and ``std`` is the sample standard deviation (0 when ``n`` is 1).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from ppo.metrics.expressions import parse_check
from ppo.nightly.history import KEY_METRICS, Baseline, write_baseline
from ppo.nightly.run_facts import read_run_dir
from ppo.nightly.runner import NightOptions, describe_launch_failure, fresh_run_dir, launch, utc_now
from ppo.nightly.suite import SuiteEntry


def band(runs: Sequence[Mapping[str, Mapping[str, float]]], metrics: Sequence[str]) -> dict[str, dict[str, list]]:
    """Per-step statistics of each metric over ``runs`` (reference-layout metrics, one per run)."""
    out: dict[str, dict[str, list]] = {}
    for name in dict.fromkeys(metrics):
        by_step: dict[int, list[float]] = {}
        for data in runs:
            for step, value in data.get(name, {}).items():
                by_step.setdefault(int(step), []).append(float(value))
        if not by_step:
            continue
        cols: dict[str, list] = {"step": [], "mean": [], "std": [], "min": [], "max": [], "n": []}
        for step in sorted(by_step):
            values = by_step[step]
            cols["step"].append(step)
            cols["n"].append(len(values))
            for col, value in _stats(values).items():
                cols[col].append(value)
        out[name] = cols
    return out


def run_baseline(entry: SuiteEntry, seeds: int, options: NightOptions, *, first_seed: int = 0) -> Baseline:
    """Launch ``entry`` once per seed and write its band to ``options.history``; returns the baseline."""
    if seeds < 1:
        raise ValueError("seeds must be at least 1")
    base_overrides = [o for o in entry.overrides if o.split("=", 1)[0].strip() != "seed"]
    metrics_wanted = list(KEY_METRICS) + [m for c in entry.nightly.checks for m in parse_check(c).metrics]
    used, runs, commit, config_hash = [], [], None, None
    for seed in range(first_seed, first_seed + seeds):
        run_dir = fresh_run_dir(options.runs_dir / "baseline" / entry.name / f"seed-{seed}")
        options.log(f"[baseline] {entry.name}: seed {seed} -> {run_dir}")
        result = launch(
            options.launcher, entry.experiment, [*base_overrides, f"seed={seed}"],
            executor=options.executor, run_dir=run_dir, timeout_s=entry.timeout_s, extra_args=entry.launch_args,
        )
        facts = read_run_dir(run_dir)
        problem = describe_launch_failure(result, facts.job_error) or facts.metrics_problem
        runs.append({
            "seed": seed, "run_dir": str(run_dir.resolve()), "exit_code": result.exit_code,
            "last_step": facts.last_step, "used": not problem, "problem": problem,
        })
        if problem:
            options.log(f"[baseline] {entry.name}: seed {seed} not used: {problem}")
            continue
        used.append(facts.metrics)
        commit = commit or facts.git_commit
        config_hash = config_hash or facts.config_hash
    baseline = Baseline(
        recipe=entry.name,
        metrics=band(used, metrics_wanted),
        seeds=list(range(first_seed, first_seed + seeds)),
        runs=runs,
        created_at=utc_now().isoformat(),
        experiment=str(entry.experiment),
        overrides=base_overrides,
        git_commit=commit,
        config_hash=config_hash,
    )
    if used:
        path = write_baseline(options.history, baseline)
        options.log(f"[baseline] {entry.name}: {len(used)} of {seeds} runs in the band -> {path}")
    return baseline


def _stats(values: Sequence[float]) -> dict[str, float]:
    """mean, std, min, max; NaN in, NaN out (a diverged seed makes the band unusable, not narrower)."""
    if any(math.isnan(v) for v in values):
        return dict.fromkeys(("mean", "std", "min", "max"), math.nan)
    finite = all(math.isfinite(v) for v in values)
    mean = math.fsum(values) / len(values) if finite else sum(values) / len(values)
    if len(values) == 1:
        std = 0.0
    else:
        std = statistics.stdev(values) if finite else math.nan
    return {"mean": mean, "std": std, "min": min(values), "max": max(values)}
