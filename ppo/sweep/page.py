"""The sweep report's HTML page: tables, a parallel-coordinates plot of the trials, curves of the best configurations.

The page is built with :func:`ppo.nightly.page.render_page`, so it is one self-contained file that works offline
(plotly.js inlined, no URL, a Content-Security-Policy that forbids fetches) and reports its render state on the
``<html>`` element for headless checks.

- Parallel coordinates: one line per trial that has the metric at the sweep's step; one axis per swept path (a
  numeric path spanning two or more decades is drawn as log10; text, booleans and None as categories), then the
  seed and the metric; lines coloured by the metric.
- Curves: the metric against the step for every trial of the ``top`` best configurations, one colour per
  configuration, the sweep's step marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from ppo.nightly.page import figure_block, render_page, text
from ppo.sweep.results import SweepResults

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
STYLES = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
.plot { width: 100%; height: 460px; }
.note { color: #666; }
"""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _dimension(label: str, values: Sequence) -> dict:
    """A parcoords axis: numbers as they are (log10 over two decades or more), anything else as categories."""
    if all(_is_number(v) for v in values):
        floats = [float(v) for v in values]
        positive = [v for v in floats if v > 0]
        if len(positive) == len(floats) and floats and max(floats) / min(floats) >= 100:
            return {"label": f"log10({label})", "values": [math.log10(v) for v in floats]}
        return {"label": label, "values": floats}
    ordered = sorted(set(values), key=lambda v: (0, v, "") if _is_number(v) else (1, 0, repr(v)))
    codes = {v: i for i, v in enumerate(ordered)}
    return {"label": label, "values": [codes[v] for v in values], "tickvals": list(range(len(ordered))),
            "ticktext": [v if isinstance(v, str) else repr(v) for v in ordered]}


def parallel_coordinates(results: SweepResults) -> go.Figure | None:
    rows = results.trials.dropna(subset=["metric"])
    if rows.empty:
        return None
    dims = [_dimension(axis, list(rows[axis])) for axis in results.axes]
    dims.append(_dimension("seed", list(rows["seed"])))
    metric = f"{results.metric} @ {results.sweep['step']}"
    dims.append({"label": metric, "values": list(rows["metric"])})
    line = {"color": list(rows["metric"]), "colorscale": "Viridis", "showscale": True,
            "reversescale": not results.maximize}
    figure = go.Figure(go.Parcoords(line=line, dimensions=dims))
    figure.update_layout(title=f"trials by {metric}", template="plotly_white", margin={"l": 80, "r": 80, "t": 80})
    return figure


def best_curves(results: SweepResults, top: int = 3) -> go.Figure | None:
    configs = results.configs.head(top)
    if configs.empty or not results.curves:
        return None
    figure = go.Figure()
    for i, (_, config) in enumerate(configs.iterrows()):
        color = COLORS[i % len(COLORS)]
        label = " ".join(f"{a}={config[a]}" for a in results.axes) or "base"
        members = results.trials[results.trials["config_id"] == config["config_id"]]
        for j, (_, trial) in enumerate(members.iterrows()):
            curve = results.curves.get(trial["trial"])
            if not curve:
                continue
            steps = sorted(curve)
            figure.add_trace(go.Scatter(x=steps, y=[curve[s] if math.isfinite(curve[s]) else None for s in steps],
                                        mode="lines+markers", line={"color": color}, legendgroup=config["config_id"],
                                        name=f"#{config['rank']} {label}", showlegend=j == 0,
                                        hovertext=f"trial {trial['trial']} seed {trial['seed']} ({trial['status']})"))
    figure.add_vline(x=results.sweep["step"], line_dash="dot", line_color="#888")
    figure.update_layout(title=f"{results.metric}: the best {len(configs)} configuration(s), every seed",
                         xaxis_title="step", yaxis_title=results.metric, template="plotly_white")
    return figure


def html_table(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "<td></td>" if math.isnan(value) else f"<td>{value:.4g}</td>"
        css = "" if isinstance(value, (int, float)) else ' class="text"'
        return f"<td{css}>{text(value)}</td>"

    head = "".join(f"<th>{text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(row[c]) for c in columns) + "</tr>" for _, row in frame.iterrows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(results: SweepResults, top: int = 3) -> str:
    sweep = results.sweep
    title = f"sweep {sweep['id']}"
    parts = [f"<h1>{text(title)}</h1>",
             f"<p>{text(results.metric)} at step {sweep['step']} ({text(sweep['mode'])}); base "
             f"{text(sweep['base'])}; {len(results.trials)} trial(s), {len(results.configs)} configuration(s).</p>"]
    figures = [("parcoords", parallel_coordinates(results)), ("curves", best_curves(results, top))]
    for name, figure in figures:
        parts.append(figure_block(figure, name) if figure is not None
                     else f'<p class="note">no {name}: no trial has the metric yet</p>')
    config_cols = ["rank", *results.axes, "mean ± std", "best", "steps", "step_time", "done", "stopped", "failed",
                   "active", "config_id"]
    trial_cols = ["trial", *results.axes, "seed", "status", "steps", "metric", "best", "best_step", "step_time",
                  "attempts", "reason"]
    parts += ["<h2>configurations</h2>", html_table(results.configs, config_cols),
              "<h2>trials</h2>", html_table(results.trials, trial_cols)]
    return render_page(title, "\n".join(parts), styles=STYLES)
