"""The sweep report's static figures, drawn with matplotlib as PNG and SVG files beside ``report.html``.

- ``by_axis``: the metric at the sweep's step against each swept path, one panel per path. A line joins the
  configurations that share the other paths' values (one line per combination of them, named in the legend; a path
  that this one determines, as a ``Tied`` partner does, is left out of the combination); the band is mean ± std
  over the configuration's seeds, and every seed is a dot.
- ``heatmap``: when the sweep has exactly two swept paths and its configurations fill their grid (λ_value ×
  λ_policy), the mean over seeds per cell, written in the cell with its std (— where no seed has the metric yet).
- ``curves``: every trial's metric against the step, coloured by its configuration's rank (the 10 best; the rest
  grey), dashed when the trial is not done (stopped, failed, still running), the sweep's step marked.
- ``parallel``: parallel coordinates of the trials that have the metric: one vertical axis per swept path, then
  the seed and the metric, one line per trial coloured by the metric (the best bright; dashed: stopped early).
- ``history``: each configuration's metric in the order it was tried, the best so far as a step line.
- ``importance``: each swept path's importance to the metric (:mod:`ppo.sweep.importance`), as bars.

Configurations with a stopped seed are marked wherever they appear (a hollow ✕ in ``by_axis`` and ``history``,
``K stopped`` in heatmap cells and the curves' legend), and titles are wrapped to the figure's width.

A numeric path spanning two decades or more is drawn on a log scale; text, booleans, None (and numbers mixed with
them) as evenly spaced categories. A figure with nothing to show is not drawn, and a file of that name left by an
earlier report is removed. The figures use :class:`matplotlib.figure.Figure` directly (no pyplot, no backend state).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ppo.sweep.results import SweepResults
from ppo.sweep.scales import ordered, scale_of, tick

PALETTE = colormaps["tab10"]
OTHERS = "#bbbbbb"
DPI = 150


@dataclass(frozen=True)
class Drawn:
    """One figure written as ``<name>.png`` and ``<name>.svg``."""

    name: str
    title: str
    png: Path
    svg: Path


def _metric_label(results: SweepResults) -> str:
    return f"{results.metric} @ step {results.sweep['step']}"


def _cmap(results: SweepResults):
    """viridis, with the best value bright whichever the sweep's direction."""
    return colormaps["viridis" if results.maximize else "viridis_r"]


# ---------------------------------------------------------------------------------------------- metric by axis
def by_axis_figure(results: SweepResults) -> Figure | None:
    configs = results.configs.dropna(subset=["mean"])
    if not results.axes or configs.empty:
        return None
    cols = min(len(results.axes), 3)
    rows = math.ceil(len(results.axes) / cols)
    fig = Figure(figsize=(4.8 * cols, 3.6 * rows), layout="constrained")
    panels = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, axis in zip(panels, results.axes):
        _axis_panel(ax, results, configs, axis)
    for ax in panels[len(results.axes):]:
        ax.set_visible(False)
    title = f"{_metric_label(results)}: mean ± std over seeds (band), one dot per seed"
    if (configs["stopped"] > 0).any():
        title += "; ✕ a configuration with stopped seeds (ranked after the completed ones)"
    fig.suptitle(fitted(title, fig.get_figwidth(), 11), fontsize=11)
    return fig


def fitted(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped to lines that fit ``width_in`` inches at ``fontsize`` points (an average glyph is about
    0.55 em wide), so a title is never cut at the figure's edges."""
    return "\n".join(textwrap.wrap(text, max(20, int(width_in * 72 / (0.55 * fontsize)))))


def _determines(configs, axis: str, other: str) -> bool:
    """Whether each value of ``axis`` comes with one value of ``other`` (a ``Tied`` partner, a path never varied)."""
    partner: dict = {}
    return all(partner.setdefault(a, b) == b for a, b in zip(configs[axis], configs[other]))


def _axis_panel(ax, results: SweepResults, configs, axis: str) -> None:
    scale = scale_of(list(results.configs[axis]))
    others = [a for a in results.axes if a != axis and not _determines(results.configs, axis, a)]
    groups: dict[tuple, list] = {}
    for _, config in configs.iterrows():
        groups.setdefault(tuple(config[a] for a in others), []).append(config)
    for i, (key, members) in enumerate(groups.items()):
        members.sort(key=lambda c: scale.position(c[axis]))
        color = PALETTE(i % PALETTE.N)
        x = [scale.position(c[axis]) for c in members]
        mean = np.array([c["mean"] for c in members], dtype=float)
        std = np.nan_to_num(np.array([c["std"] for c in members], dtype=float))
        label = ", ".join(f"{a}={tick(v)}" for a, v in zip(others, key)) or None
        searched = results.sweep.get("search") is not None  # points a study chose: no line joins them
        ax.plot(x, mean, marker="o", markersize=4, color=color, label=label, linestyle="none" if searched else "-")
        if not searched:
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        seeds = results.trials[results.trials["config_id"].isin([c["config_id"] for c in members])]
        seeds = seeds.dropna(subset=["metric"])
        ax.scatter([scale.position(v) for v in seeds[axis]], seeds["metric"], color=color, s=12, alpha=0.7, zorder=3)
        cut = [c for c in members if c["stopped"] > 0]
        if cut:
            ax.scatter([scale.position(c[axis]) for c in cut], [c["mean"] for c in cut], marker="X", s=70,
                       facecolor="white", edgecolor=color, linewidth=1.2, zorder=4)
    if scale.log:
        ax.set_xscale("log")
    if scale.categories:
        ax.set_xticks(range(len(scale.categories)), [tick(v) for v in scale.categories])
    ax.set_xlabel(axis)
    ax.set_ylabel(_metric_label(results), fontsize=9)
    ax.grid(alpha=0.3)
    if others and len(groups) <= PALETTE.N:
        ax.legend(fontsize=7)


# ---------------------------------------------------------------------------------------------- heatmap
def heatmap_figure(results: SweepResults) -> Figure | None:
    if len(results.axes) != 2:
        return None
    row_axis, col_axis = results.axes
    configs = results.configs
    row_values, col_values = ordered(configs[row_axis]), ordered(configs[col_axis])
    cells = {(c[row_axis], c[col_axis]): c for _, c in configs.iterrows()}
    if len(cells) != len(configs) or len(cells) != len(row_values) * len(col_values) or min(
            len(row_values), len(col_values)) < 2 or configs["mean"].isna().all():
        return None
    mean = np.array([[cells[r, c]["mean"] for c in col_values] for r in row_values], dtype=float)
    fig = Figure(figsize=(1.3 * len(col_values) + 3.2, 0.8 * len(row_values) + 1.8), layout="constrained")
    ax = fig.subplots()
    cmap = _cmap(results).with_extremes(bad="#e0e0e0")
    image = ax.imshow(np.ma.masked_invalid(mean), cmap=cmap, aspect="auto")
    for i, r in enumerate(row_values):
        for j, c in enumerate(col_values):
            config = cells[r, c]
            text, color = "—", "#444444"
            if not math.isnan(config["mean"]):
                spread = f"± {config['std']:.2g}" if config["n"] > 1 else "(n=1)"
                text = f"{config['mean']:.3g}\n{spread}" + (f"\n{config['stopped']} stopped" if config["stopped"]
                                                             else "")
                red, green, blue, _ = cmap(image.norm(config["mean"]))
                color = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(col_values)), [tick(v) for v in col_values])
    ax.set_yticks(range(len(row_values)), [tick(v) for v in row_values])
    ax.set_xlabel(col_axis)
    ax.set_ylabel(row_axis)
    ax.set_title(fitted(f"{_metric_label(results)}: mean ± std over seeds", fig.get_figwidth() - 1.5, 10),
                 fontsize=10)
    fig.colorbar(image, ax=ax, label=results.metric)
    return fig


# ---------------------------------------------------------------------------------------------- every curve
def curves_figure(results: SweepResults) -> Figure | None:
    if not results.curves:
        return None
    longest = max((len(" ".join(f"{a}={tick(v)}" for a, v in zip(results.axes, row))) for row in
                   results.configs[results.axes].itertuples(index=False)), default=0)
    fig = Figure(figsize=(max(9.0, 5.5 + 0.06 * longest), 4.2), layout="constrained")  # room for the legend
    ax = fig.subplots()
    grey_labelled = False
    for _, config in results.configs.iterrows():
        rank = int(config["rank"])
        coloured = rank <= PALETTE.N
        stopped = f" ({config['stopped']} stopped)" if config["stopped"] else ""
        short = " ".join(f"{a}={tick(config[a])}" for a in results.axes) or "base"
        label = f"#{rank} {short}{stopped}" if coloured else None
        if not coloured and not grey_labelled:
            label, grey_labelled = f"rank > {PALETTE.N}", True
        for _, trial in results.trials[results.trials["config_id"] == config["config_id"]].iterrows():
            curve = results.curves.get(trial["trial"])
            if not curve:
                continue
            steps = sorted(curve)
            ax.plot(steps, [curve[s] if math.isfinite(curve[s]) else math.nan for s in steps],
                    color=PALETTE(rank - 1) if coloured else OTHERS, linestyle="-" if trial["status"] == "done"
                    else "--", marker="o" if len(steps) < 30 else None, markersize=3, linewidth=1.3,
                    zorder=3 if coloured else 2, label=label)
            label = None
    ax.axvline(results.sweep["step"], color="#888888", linestyle=":", linewidth=1,
               label=f"step {results.sweep['step']}")
    ax.set_xlabel("step")
    ax.set_ylabel(results.metric)
    ax.set_title(f"every trial ({len(results.curves)})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="configuration (dashed: not done)",
              title_fontsize=7)
    return fig


# ---------------------------------------------------------------------------------------------- parallel coordinates
def _coordinate(values: Sequence, max_ticks: int) -> tuple[list[float], list[tuple[float, str]], str]:
    """Positions in [0, 1] of ``values`` on one vertical axis, its tick labels, and a prefix for its name."""
    scale = scale_of(values)
    if scale.categories:
        last = max(len(scale.categories) - 1, 1)
        where = {v: (i / last if len(scale.categories) > 1 else 0.5) for i, v in enumerate(scale.categories)}
        return [where[v] for v in values], [(p, tick(v)) for v, p in where.items()], ""
    raw = [math.log10(v) if scale.log else float(v) for v in values]
    lo, hi = min(raw), max(raw)
    positions = [(r - lo) / (hi - lo) if hi > lo else 0.5 for r in raw]
    ticks = dict(zip(values, positions))
    if len(ticks) > max_ticks:
        ticks = {values[raw.index(lo)]: positions[raw.index(lo)], values[raw.index(hi)]: positions[raw.index(hi)]}
    return positions, [(p, tick(v)) for v, p in ticks.items()], "log " if scale.log else ""


def parallel_figure(results: SweepResults) -> Figure | None:
    rows = results.trials.dropna(subset=["metric"]).sort_values("metric", ascending=results.maximize)
    if rows.empty:
        return None
    columns = [*results.axes, "seed", "metric"]
    coordinates = [_coordinate(list(rows[c]), max_ticks=2 if c == "metric" else 8) for c in columns]
    names = [prefix + (f"{results.metric}\n@ step {results.sweep['step']}" if c == "metric" else c)
             for c, (_, _, prefix) in zip(columns, coordinates)]
    fig = Figure(figsize=(max(6.0, 1.9 * len(columns) + 1.5), 4.2), layout="constrained")
    ax = fig.subplots()
    cmap, norm = _cmap(results), Normalize(rows["metric"].min(), rows["metric"].max())
    for k, (value, status) in enumerate(zip(rows["metric"], rows["status"])):
        ax.plot(range(len(columns)), [positions[k] for positions, _, _ in coordinates], color=cmap(norm(value)),
                linewidth=1.4, alpha=0.85, linestyle="--" if status == "stopped" else "-")
    for i, (_, ticks, _) in enumerate(coordinates):
        ax.axvline(i, color="#444444", linewidth=0.8, zorder=0)
        for position, label in ticks:
            ax.text(i + 0.04, position, label, fontsize=7, va="center",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5})
    ax.set_xticks(range(len(columns)), names, fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.15, len(columns) - 0.55)
    ax.set_ylim(-0.06, 1.06)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    stopped = " (dashed: stopped early)" if (rows["status"] == "stopped").any() else ""
    ax.set_title(fitted(f"{len(rows)} trial(s) with {_metric_label(results)}, coloured by it{stopped}",
                        fig.get_figwidth() - 1.0, 10), fontsize=10)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=results.metric, fraction=0.03)
    return fig


# ---------------------------------------------------------------------------------------------- search history
def history_figure(results: SweepResults) -> Figure | None:
    """Each configuration's metric in the order it was tried (the study's trial number in a search), with the best
    so far among the completed ones as a step line; configurations with stopped seeds as hollow ✕."""
    configs = results.configs.dropna(subset=["mean"]).sort_values("order", kind="stable")
    if configs.empty:
        return None
    configs = configs.assign(order=range(1, len(configs) + 1))
    fig = Figure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    complete = configs[configs["stopped"] == 0]
    cut = configs[configs["stopped"] > 0]
    ax.scatter(complete["order"], complete["mean"], color=PALETTE(0), s=22, zorder=3, label="configuration")
    if not cut.empty:
        ax.scatter(cut["order"], cut["mean"], marker="X", s=60, facecolor="white", edgecolor=PALETTE(3),
                   zorder=3, label="with stopped seeds")
    if not complete.empty:
        best = list(complete["mean"].cummax() if results.maximize else complete["mean"].cummin())
        ax.step([*complete["order"], len(configs)], [*best, best[-1]], where="post", color=PALETTE(1),
                linewidth=1.5, label="best so far")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("configuration, in the order tried")
    ax.set_ylabel(_metric_label(results), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(fitted(f"search history: {len(configs)} configuration(s) with the metric", 6.0, 10), fontsize=10)
    return fig


def importance_figure(results: SweepResults) -> Figure | None:
    from ppo.sweep.importance import importances

    table = importances(results)
    if table is None or table.empty:
        return None
    fig = Figure(figsize=(6.4, 0.45 * len(table) + 1.4), layout="constrained")
    ax = fig.subplots()
    ax.barh(range(len(table)), table["importance"], color=PALETTE(0))
    ax.set_yticks(range(len(table)), list(table["path"]), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("importance (PED-ANOVA, sums to 1)")
    for i, value in enumerate(table["importance"]):
        ax.text(value, i, f" {value:.2f}", va="center", fontsize=8)
    ax.set_xlim(0, max(1.0, float(table["importance"].max()) * 1.15))
    ax.set_title(fitted(f"which hyperparameter mattered to {results.metric}", 5.0, 10), fontsize=10)
    return fig


FIGURES: dict[str, tuple[str, Callable[[SweepResults], Figure | None]]] = {
    "by_axis": ("the metric against each swept path: mean ± std over seeds, one dot per seed", by_axis_figure),
    "heatmap": ("the two swept paths as a grid: mean ± std over seeds per configuration", heatmap_figure),
    "curves": ("every trial's curve, coloured by its configuration's rank", curves_figure),
    "parallel": ("parallel coordinates: one line per trial, coloured by the metric", parallel_figure),
    "history": ("the metric in the order configurations were tried, and the best so far", history_figure),
    "importance": ("each swept path's importance to the metric (PED-ANOVA)", importance_figure),
}


def draw_figures(results: SweepResults, out: Path) -> list[Drawn]:
    """Each figure of :data:`FIGURES` that has something to show, as ``out/<name>.png`` and ``out/<name>.svg``."""
    drawn = []
    for name, (title, draw) in FIGURES.items():
        png, svg = out / f"{name}.png", out / f"{name}.svg"
        figure = draw(results)
        if figure is None:
            png.unlink(missing_ok=True)
            svg.unlink(missing_ok=True)
            continue
        figure.savefig(png, dpi=DPI, metadata={"Software": None})
        figure.savefig(svg, metadata={"Date": None})
        drawn.append(Drawn(name, title, png, svg))
    return drawn
