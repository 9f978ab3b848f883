"""The dashboard's plotly figures: check values over nights against their thresholds, and tonight's curves over
the recipe's baseline band. Only SVG traces (``go.Scatter``): they draw without WebGL, in any headless browser.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ppo.metrics.expressions import CheckError
from ppo.nightly.history import KEY_METRICS, Baseline, NightRecord
from ppo.nightly.thresholds import Comparison, comparisons, evaluate_subject

STATUS_COLORS = {"PASS": "#2e7d32", "FAIL": "#c62828", "INFRA-FAIL": "#757575"}
TEMPLATE = "plotly_white"
PANEL_HEIGHT = 230


def check_history_figure(records: Sequence[NightRecord]) -> go.Figure | None:
    """One panel per comparison of the latest record's checks (earlier checks when it has none): its value each
    night, a marker coloured by that check's status that night, and a dashed line per threshold. ``None`` when
    the recipe has no checks or no night evaluated one."""
    if not records:
        return None
    latest_checks = [c["check"] for c in records[-1].checks] or [c["check"] for r in records for c in r.checks]
    panels: list[tuple[str, Comparison]] = []
    for source in dict.fromkeys(latest_checks):
        try:
            panels.extend((source, comparison) for comparison in comparisons(source))
        except CheckError:
            continue
    if not panels:
        return None
    nights = [r.night for r in records]
    fig = make_subplots(
        rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=min(0.08, 0.3 / len(panels)),
        subplot_titles=[_shorten(c.source, 110) for _, c in panels],
    )
    plotted = 0
    for row, (source, comparison) in enumerate(panels, start=1):
        values, colors, hover = [], [], []
        for record in records:
            entry = next((c for c in record.checks if c["check"] == source), None)
            value = _night_value(record, entry, source, comparison)
            status = entry["status"] if entry else "not checked"
            values.append(value)
            colors.append(STATUS_COLORS.get(status, "#757575"))
            message = entry["message"] if entry and entry["message"] else ""
            hover.append(f"{record.night}: {status}" + (f"<br>{_shorten(message, 120)}" if message else ""))
        plotted += sum(v is not None for v in values)
        fig.add_trace(
            go.Scatter(
                x=nights, y=values, mode="lines+markers", name=comparison.subject, showlegend=False,
                line={"color": "#455a64", "width": 1.5}, marker={"color": colors, "size": 10},
                text=hover, hovertemplate="%{text}<br>value %{y:.6g}<extra></extra>", connectgaps=False,
            ),
            row=row, col=1,
        )
        for threshold in comparison.thresholds:
            fig.add_hline(
                y=threshold.value, row=row, col=1, line={"color": "#c62828", "dash": "dash", "width": 1.5},
                annotation_text=threshold.label, annotation_position="top left",
            )
        fig.update_yaxes(title_text=_shorten(comparison.subject, 40), title_font={"size": 10}, row=row, col=1)
    if not plotted:
        return None
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=nights)
    fig.update_annotations(font_size=11)
    fig.update_layout(
        template=TEMPLATE, height=max(PANEL_HEIGHT * len(panels), 300), margin={"l": 70, "r": 20, "t": 40, "b": 40},
    )
    return fig


def curves_figure(record: NightRecord, baseline: Baseline | None) -> go.Figure | None:
    """The key metrics of ``record`` over steps, each over its baseline band (min–max, mean ± std, mean)."""
    metrics = [m for m in KEY_METRICS if m in record.curves or (baseline and m in baseline.metrics)]
    if not metrics:
        return None
    cols = 2
    rows = math.ceil(len(metrics) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=metrics, horizontal_spacing=0.08, vertical_spacing=0.12)
    for index, metric in enumerate(metrics):
        row, col = index // cols + 1, index % cols + 1
        first = index == 0
        band = baseline.metrics.get(metric) if baseline else None
        if band:
            _add_band(fig, band, row, col, show_legend=first, seeds=len([r for r in baseline.runs if r.get("used")]))
        series = record.curves.get(metric)
        if series:
            steps = [int(s) for s in series]
            fig.add_trace(
                go.Scatter(
                    x=steps, y=[_plottable(v) for v in series.values()], mode="lines+markers" if len(steps) < 30
                    else "lines", name=f"{record.night}", legendgroup="tonight", showlegend=first,
                    line={"color": "#1565c0", "width": 2}, marker={"size": 4},
                    hovertemplate="step %{x}: %{y:.6g}<extra>" + record.night + "</extra>",
                ),
                row=row, col=col,
            )
    fig.update_annotations(font_size=12)
    fig.update_xaxes(title_text="step", title_font={"size": 10})
    fig.update_layout(
        template=TEMPLATE, height=max(280 * rows, 320), margin={"l": 60, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "y": 1.06, "x": 0},
    )
    return fig


def _add_band(fig: go.Figure, band: dict, row: int, col: int, *, show_legend: bool, seeds: int) -> None:
    steps = band["step"]
    lo_std = [m - s for m, s in zip(band["mean"], band["std"])]
    hi_std = [m + s for m, s in zip(band["mean"], band["std"])]
    layers = [
        (band["min"], band["max"], "rgba(255,152,0,0.15)", f"baseline min–max ({seeds} seeds)", "band-range"),
        (lo_std, hi_std, "rgba(255,152,0,0.35)", "baseline mean ± std", "band-std"),
    ]
    for lower, upper, color, name, group in layers:
        fig.add_trace(
            go.Scatter(x=steps, y=[_plottable(v) for v in upper], mode="lines", line={"width": 0},
                       legendgroup=group, showlegend=False, hoverinfo="skip"),
            row=row, col=col,
        )
        fig.add_trace(
            go.Scatter(x=steps, y=[_plottable(v) for v in lower], mode="lines", line={"width": 0}, fill="tonexty",
                       fillcolor=color, name=name, legendgroup=group, showlegend=show_legend, hoverinfo="skip"),
            row=row, col=col,
        )
    fig.add_trace(
        go.Scatter(x=steps, y=[_plottable(v) for v in band["mean"]], mode="lines", name="baseline mean",
                   legendgroup="band-mean", showlegend=show_legend,
                   line={"color": "#ef6c00", "dash": "dash", "width": 1.5},
                   hovertemplate="step %{x}: mean %{y:.6g}<extra>baseline</extra>"),
        row=row, col=col,
    )


def _night_value(record: NightRecord, entry: dict | None, source: str, comparison: Comparison) -> float | None:
    """The recorded value for a one-comparison check, else the comparison evaluated on the stored curves; ``None``
    on nights the check was not evaluated (absent, or INFRA-FAIL: a partial run's values would mislead)."""
    if entry is None or entry.get("status") == "INFRA-FAIL":
        return None
    if comparison.source == source and isinstance(entry.get("value"), (int, float)):
        return _plottable(float(entry["value"]))
    value = evaluate_subject(comparison, record.curves)
    return _plottable(value) if value is not None else None


def _plottable(value: float | str | None) -> float | None:
    """Plotly's JSON has no NaN or infinity: they become gaps."""
    if value is None or isinstance(value, str):
        return None
    return value if math.isfinite(value) else None


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
