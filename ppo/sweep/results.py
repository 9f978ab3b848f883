"""A sweep's results as pandas tables: one row per trial, one row per configuration (its seeds aggregated).

Trial table columns: ``trial``, ``config_id``, one column per swept path, ``seed``, ``status``, ``reason``,
``steps`` (the last step logged), ``metric`` (at the sweep's step: the value at the largest logged step not after
it, provided the trial got that far; NaN otherwise), ``best`` and ``best_step`` (over every logged step, in the
sweep's direction), ``step_time`` (the mean of ``step_time_metric``), ``attempts``, ``run_dir`` and ``order`` (the
study's trial number in a search, else the trial's place in ``state.json``: the order trials were planned).

Configuration table: the swept paths, ``n`` (seeds with a metric), ``trials``, ``mean``, ``std`` (sample standard
deviation, NaN for one seed), ``mean ± std``, ``best``, ``steps`` (the most any seed reached), ``step_time``, how
many trials are done / stopped / failed / running or pending, and ``order`` (its first trial's).  Sorted best
first, in three blocks: the configurations none of whose seeds was stopped, then those with a stopped seed that
still has a metric (a trial stopped late, or a surviving seed: their ``mean ± std`` says ``K stopped``), then those
without a metric.  A configuration that early stopping judged poor never ranks above one that ran to the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ppo.metrics import MetricsFormatError, last_step, load_metrics
from ppo.sweep.state import read_sweep_dir
from ppo.sweep.stopping import value_at


@dataclass
class SweepResults:
    dir: Path
    sweep: dict
    axes: list[str]
    trials: pd.DataFrame
    configs: pd.DataFrame
    curves: dict[str, dict[int, float]]
    """``{trial id: {step: metric}}`` of every trial that logged the metric."""
    points: dict[str, dict]
    """``{config id: {path: value}}``, the values exactly as the sweep set them."""

    @property
    def metric(self) -> str:
        return self.sweep["metric"]

    @property
    def maximize(self) -> bool:
        return self.sweep["mode"] == "max"


def axis_columns(sweep: dict, state: dict | None) -> list[str]:
    paths = list(sweep.get("axes", []))
    for record in (state or {}).get("trials", {}).values():
        paths += [p for p in record.get("point", {}) if p not in paths]
    return paths


def _cell(value):
    """A value as a table cell: scalars as they are, containers as their repr (hashable, readable)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def _trial_row(sweep_dir: Path, trial_id: str, record: dict, axes: list[str], sweep: dict,
               position: int) -> tuple[dict, dict]:
    metric, step, maximize = sweep["metric"], sweep["step"], sweep["mode"] == "max"
    try:
        data = load_metrics(sweep_dir / record.get("run_dir", f"trials/{trial_id}"))
    except (OSError, MetricsFormatError):
        data = {}
    series = data.get(metric, {})
    reached = last_step(data)
    finite = {int(s): v for s, v in series.items() if math.isfinite(v)}
    at_step = value_at(series, step) if reached is not None and reached >= step else None
    best_step = (max if maximize else min)(finite, key=finite.get) if finite else None
    times = [v for v in data.get(sweep.get("step_time_metric", ""), {}).values() if math.isfinite(v)]
    row = {"trial": trial_id, "config_id": record.get("config_id"),
           **{a: _cell(record.get("point", {}).get(a)) for a in axes},
           "seed": record.get("seed"), "status": record.get("state"), "reason": record.get("reason") or "",
           "steps": reached if reached is not None else math.nan,
           "metric": at_step if at_step is not None else math.nan,
           "best": finite[best_step] if best_step is not None else math.nan,
           "best_step": best_step if best_step is not None else math.nan,
           "step_time": sum(times) / len(times) if times else math.nan,
           "attempts": record.get("attempts", 0), "run_dir": record.get("run_dir", ""),
           "order": record["search"] if record.get("search") is not None else position}
    return row, {int(s): v for s, v in series.items()}


def load_results(sweep_dir: str | Path) -> SweepResults:
    sweep_dir = Path(sweep_dir)
    sweep, state = read_sweep_dir(sweep_dir)
    axes = axis_columns(sweep, state)
    rows, curves = [], {}
    for position, (trial_id, record) in enumerate(state.get("trials", {}).items()):
        row, curve = _trial_row(sweep_dir, trial_id, record, axes, sweep, position)
        rows.append(row)
        if curve:
            curves[trial_id] = curve
    columns = ["trial", "config_id", *axes, "seed", "status", "reason", "steps", "metric", "best", "best_step",
               "step_time", "attempts", "run_dir", "order"]
    trials = pd.DataFrame(rows, columns=columns)
    for axis in axes:  # keep None as None (not NaN) and ints as ints, as the sweep set them
        trials[axis] = pd.Series([row[axis] for row in rows], dtype=object)
    maximize = sweep["mode"] == "max"
    if len(trials):
        trials = trials.sort_values(["metric", "best"], ascending=not maximize, na_position="last", kind="stable")
        trials = trials.reset_index(drop=True)
    points = {r.get("config_id"): r.get("point", {}) for r in state.get("trials", {}).values()}
    return SweepResults(sweep_dir, sweep, axes, trials, config_table(trials, axes, maximize), curves, points)


def config_table(trials: pd.DataFrame, axes: list[str], maximize: bool) -> pd.DataFrame:
    columns = ["rank", "config_id", *axes, "n", "trials", "mean", "std", "mean ± std", "best", "steps", "step_time",
               "done", "stopped", "failed", "active", "order"]
    if trials.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for config_id, group in trials.groupby("config_id", sort=False, dropna=False):
        values = group["metric"].dropna()
        status = group["status"]
        best = group["best"].max() if maximize else group["best"].min()
        rows.append({
            "config_id": config_id, **{a: group[a].iloc[0] for a in axes},
            "n": int(values.size), "trials": int(len(group)),
            "mean": float(values.mean()) if values.size else math.nan,
            "std": float(values.std(ddof=1)) if values.size > 1 else math.nan,
            "best": best, "steps": group["steps"].max(), "step_time": group["step_time"].mean(),
            "done": int((status == "done").sum()), "stopped": int((status == "stopped").sum()),
            "failed": int((status == "failed").sum()), "active": int(status.isin(["pending", "running"]).sum()),
            "order": int(group["order"].min()),
        })
    table = pd.DataFrame(rows)
    for axis in axes:
        table[axis] = pd.Series([row[axis] for row in rows], dtype=object)
    table["mean ± std"] = [format_mean_std(m, s, n, k) for m, s, n, k in
                           zip(table["mean"], table["std"], table["n"], table["stopped"])]
    order = pd.DataFrame({"no_metric": table["mean"].isna(), "stopped": table["stopped"] > 0,
                          "mean": table["mean"], "best": table["best"]})
    order = order.sort_values(["no_metric", "stopped", "mean", "best"], ascending=[True, True, not maximize,
                              not maximize], na_position="last", kind="stable")
    table = table.loc[order.index].reset_index(drop=True)
    table["rank"] = range(1, len(table) + 1)
    return table[columns]


def config_label(axes: list[str], config) -> str:
    """A configuration (a row of either table) as ``path=value ...``; ``base`` when nothing is swept."""
    return " ".join(f"{a}={config[a]}" for a in axes) or "base"


def format_mean_std(mean: float, std: float, n: int, stopped: int = 0) -> str:
    """``mean ± std (n=N)``, with ``, K stopped`` when early stopping cut K of the configuration's seeds short
    (what is left is the seeds that survived: the mean flatters the configuration)."""
    if n == 0 or math.isnan(mean):
        return "—"
    cut = f", {stopped} stopped" if stopped else ""
    if n == 1 or math.isnan(std):
        return f"{mean:.4g} (n=1{cut})"
    return f"{mean:.4g} ± {std:.2g} (n={n}{cut})"


def markdown_table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table (no tabulate dependency); floats with 4 significant digits."""
    columns = columns or list(frame.columns)

    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for _, row in frame.iterrows()]
    return "\n".join(lines)
