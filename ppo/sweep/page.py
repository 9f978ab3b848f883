"""The sweep report's HTML page: the static figures, curves of the best configurations, the tables.

The page is built with :func:`ppo.nightly.page.render_page`, so it is one self-contained file that works offline
(plotly.js inlined, no URL, a Content-Security-Policy that forbids fetches). Nothing on it needs WebGL:

- the figures of :mod:`ppo.sweep.figures` (metric by swept path, heatmap, every trial's curve, parallel
  coordinates) as their PNG, inlined as ``data:`` images, each captioned with its files beside the page;
- curves: the metric against the step for every trial of the ``top`` best configurations, one colour per
  configuration, the sweep's step marked; interactive (plotly, SVG traces only: ``go.Scatter``).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from ppo.nightly.page import figure_block, render_page, text
from ppo.sweep.figures import Drawn
from ppo.sweep.results import SweepResults, config_label

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
STYLES = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
.plot { width: 100%; height: 460px; }
figure { margin: 0 0 1.5em; } figure img { max-width: 100%; height: auto; }
figcaption, .note { color: #666; }
"""


def image_block(drawn: Drawn) -> str:
    """The figure's PNG inlined (the page's CSP allows ``data:`` images only), and the names of its files."""
    data = base64.b64encode(drawn.png.read_bytes()).decode("ascii")
    files = f'<a href="{text(drawn.png.name)}">{text(drawn.png.name)}</a>, ' \
            f'<a href="{text(drawn.svg.name)}">{text(drawn.svg.name)}</a>'
    return (f'<figure data-figure="{text(drawn.name)}"><img src="data:image/png;base64,{data}" '
            f'alt="{text(drawn.title)}"><figcaption>{text(drawn.title)} ({files})</figcaption></figure>')


def best_curves(results: SweepResults, top: int = 3) -> go.Figure | None:
    configs = results.configs.head(top)
    if configs.empty or not results.curves:
        return None
    figure = go.Figure()
    for i, (_, config) in enumerate(configs.iterrows()):
        color = COLORS[i % len(COLORS)]
        label = config_label(results.axes, config)
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


def render(results: SweepResults, top: int = 3, drawn: Sequence[Drawn] = ()) -> str:
    """The page; ``drawn`` are the static figures written beside it (:func:`ppo.sweep.figures.draw_figures`)."""
    sweep = results.sweep
    title = f"sweep {sweep['id']}"
    parts = [f"<h1>{text(title)}</h1>",
             f"<p>{text(results.metric)} at step {sweep['step']} ({text(sweep['mode'])}); base "
             f"{text(sweep['base'])}; {len(results.trials)} trial(s), {len(results.configs)} configuration(s).</p>"]
    parts += [image_block(d) for d in drawn]
    curves = best_curves(results, top)
    parts.append(figure_block(curves, "curves") if curves is not None
                 else '<p class="note">no curves: no trial has the metric yet</p>')
    config_cols = ["rank", *results.axes, "mean ± std", "best", "steps", "step_time", "done", "stopped", "failed",
                   "active", "config_id"]
    trial_cols = ["trial", *results.axes, "seed", "status", "steps", "metric", "best", "best_step", "step_time",
                  "attempts", "reason"]
    parts += ["<h2>configurations</h2>", html_table(results.configs, config_cols),
              "<h2>trials</h2>", html_table(results.trials, trial_cols)]
    return render_page(title, "\n".join(parts), styles=STYLES)
