"""What ``launch.py SWEEP_FILE --dry-run`` prints: the trials, each one's difference from the base, the resources."""

from __future__ import annotations

from pathlib import Path

from ppo.config.paths import ABSENT
from ppo.config.printing import format_value
from ppo.launch.report import executor_line, plan_table
from ppo.sweep.plan import SweepPlan, gpu_hours, trial_gpus
from ppo.sweep.search import storage_url


def _change_line(path: str, old, new) -> str:
    if old is ABSENT:
        return f"    {path} = {format_value(new)}  (new)"
    return f"    {path} = {format_value(new)}  (was {format_value(old)})"


def stopping_summary(plan: SweepPlan) -> str:
    stopping = plan.loaded.spec.stopping
    if stopping is None:
        return "none"
    parts = []
    if stopping.gates:
        parts.append(f"{len(stopping.gates)} gate(s): " + "; ".join(stopping.gates))
    if stopping.divergence is not None:
        d = stopping.divergence
        watched = "every metric" if d.non_finite is None else ", ".join(d.non_finite) or "no metric"
        bounds = "".join(f", {m} in [{lo}, {hi}]" for m, (lo, hi) in d.bounds.items())
        parts.append(f"divergence: non-finite {watched}{bounds}")
    if stopping.rule is not None:
        rule = stopping.rule
        parts.append(f"{type(rule).__name__} at steps {', '.join(map(str, rule.rungs))}")
    return "; ".join(parts) or "none"


def resources_text(plan: SweepPlan) -> list[str]:
    search = plan.loaded.spec.search
    n = len(plan.trials) if search is None else search.n_trials * len(plan.loaded.spec.seeds)
    first = plan.trials[0].prepared if plan.trials else plan.base
    lines = ["each trial:", plan_table(first.plan), f"executor: {executor_line(first.executor)}"]
    gpus = trial_gpus(first)
    if gpus is None:
        lines.append(f"total: {n} trial(s) on this machine, {plan.max_parallel} at a time")
    else:
        ex = first.executor
        lines.append(f"total: {n} trial(s) x {ex.nodes} node(s) x {ex.gpus_per_node} GPU(s) = {n * gpus} GPUs in "
                     f"all, at most {min(plan.max_parallel, n) * gpus} at once (array parallelism "
                     f"{plan.max_parallel}); at most {gpu_hours(plan):.1f} GPU-hours ({ex.time_minutes} min limit "
                     f"each)")
    budget = plan.loaded.spec.budget
    if budget is not None:
        lines.append(f"budget: max_trials={budget.max_trials}, max_gpu_hours={budget.max_gpu_hours}")
    return lines


def dry_run_text(plan: SweepPlan, sweep_dir: Path, sbatch: str | None = None) -> str:
    loaded, spec = plan.loaded, plan.loaded.spec
    points = len({t.trial.config_id for t in plan.trials})
    search = spec.search
    if search is not None:
        count = (f"trials:     up to {search.n_trials * len(spec.seeds)} = {search.n_trials} configuration(s) "
                 f"chosen by the study x {len(spec.seeds)} seed(s); executor {plan.kind}, {plan.max_parallel} at a "
                 f"time")
    else:
        count = (f"trials:     {len(plan.trials)} = {points} configuration(s) x {len(spec.seeds)} seed(s); executor "
                 f"{plan.kind}, {plan.max_parallel} at a time")
    parts = [
        f"sweep:      {loaded.path} (id {loaded.name})",
        f"base:       {loaded.base_path}",
        f"metric:     {spec.metric} at step {spec.step} ({spec.mode})",
        f"stopping:   {stopping_summary(plan)}",
        count,
        f"sweep dir:  {sweep_dir} (not created by --dry-run)",
        "",
        "== common to every trial (changes from the base file)",
    ]
    common = plan.base.edits.changes()
    parts += [f"  {c.path} = {format_value(c.new)}  # <- {source}" for c, source in common] or ["  (none)"]
    if search is not None:
        parts += ["", f"== search: {search.sampler} sampler (seed {search.seed}), study in "
                      f"{storage_url(search, sweep_dir)}; each bound below was prepared like a trial's override"]
        parts += [f"  {line}" for line in search.describe()]
    parts += ["", "== trials (id, seed, overrides; then the flattened difference from the common base)"]
    if search is not None:
        parts.append("  (chosen one at a time by the study, from every result so far)")
    for planned in plan.trials:
        trial = planned.trial
        shown = " ".join(f"{p}={v!r}" for p, v in trial.point.items()) or "(base)"
        parts.append(f"{trial.id}  seed={trial.seed}  {shown}")
        parts += [_change_line(c.path, c.old, c.new) for c in planned.changes] or ["    (no difference)"]
    parts += ["", "== resources", *resources_text(plan)]
    missing = getattr(plan.base, "missing_paths", None) or []
    if missing:
        parts += [f"input paths not found on this machine (checked again at submission): {len(missing)}",
                  *(f"  {m}" for m in missing)]
    if sbatch is not None:
        parts += ["", "== sbatch script (one job array)", sbatch.rstrip("\n")]
    return "\n".join(parts) + "\n"
