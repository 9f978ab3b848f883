"""``ppo/sweep/figures.py`` on synthetic sweep directories: what each figure draws, read back from its matplotlib
objects (no file written), and when a figure is left out."""

from __future__ import annotations

import json
import statistics

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from ppo.sweep.figures import (
    PALETTE,
    by_axis_figure,
    curves_figure,
    draw_figures,
    heatmap_figure,
    history_figure,
    importance_figure,
    parallel_figure,
)
from ppo.sweep.importance import importances
from ppo.sweep.results import load_results
from tests.sweep.conftest import fake_sweep, lam_grid

VALUE, POLICY = "advantage.lam_value", "advantage.lam_policy"


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return load_results(lam_grid(tmp_path_factory.mktemp("figures") / "lam_grid"))


def seed_values(results, **point) -> list[float]:
    """The metric of each seed of the configuration at ``point`` (read from the trial table)."""
    rows = results.trials
    for path, value in point.items():
        rows = rows[rows[path] == value]
    return sorted(rows["metric"].dropna())


def test_heatmap_cells_are_mean_and_std_over_seeds(grid):
    ax = heatmap_figure(grid).axes[0]
    cells = ax.images[0].get_array()
    texts = iter(t.get_text() for t in ax.texts)
    for i, value in enumerate((0.95, 0.99, 1.0)):
        for j, policy in enumerate((0.9, 0.95, 1.0)):
            seeds = seed_values(grid, **{VALUE: value, POLICY: policy})
            if (value, policy) == (1.0, 0.9):  # stopped at step 3 of 8: no metric, a grey cell
                assert seeds == [] and cells.mask[i, j] and next(texts) == "—"
                continue
            mean, std = statistics.mean(seeds), statistics.stdev(seeds)
            assert len(seeds) == 3 and cells[i, j] == pytest.approx(mean)
            assert next(texts) == f"{mean:.3g}\n± {std:.2g}"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.9", "0.95", "1"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.95", "0.99", "1"]
    assert (ax.get_ylabel(), ax.get_xlabel()) == (VALUE, POLICY)


def test_no_heatmap_unless_two_paths_fill_their_grid(tmp_path):
    def heatmap(name, points):
        return heatmap_figure(load_results(fake_sweep(tmp_path / name, points, [0], lambda p, seed, s: 0.1 * s)))

    assert heatmap("one", [{"a": 1}, {"a": 2}]) is None
    assert heatmap("partial", [{"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 2, "b": 1}]) is None
    assert heatmap("three", [{"a": a, "b": b, "c": 0} for a in (1, 2) for b in (1, 2)]) is None
    assert heatmap("full", [{"a": a, "b": b} for a in (1, 2) for b in ("x", None)]) is not None


def test_by_axis_one_line_per_other_value_with_its_seed_band_and_dots(grid):
    panels = [ax for ax in by_axis_figure(grid).axes if ax.get_visible()]
    assert [ax.get_xlabel() for ax in panels] == [VALUE, POLICY]
    ax = panels[0]
    lines = ax.get_lines()
    assert sorted(line.get_label() for line in lines) == [f"{POLICY}=0.9", f"{POLICY}=0.95", f"{POLICY}=1"]
    bands, dots = ax.collections[0::2], ax.collections[1::2]  # fill_between, then scatter, per line
    for line, band, dot in zip(lines, bands, dots):
        policy = float(line.get_label().split("=")[1])
        x, y = line.get_data()
        values = [v for v in (0.95, 0.99, 1.0) if seed_values(grid, **{VALUE: v, POLICY: policy})]
        assert list(x) == values  # (1.0, 0.9) has no metric: not on its line
        vertices = band.get_paths()[0].vertices
        for xv, yv in zip(x, y):
            seeds = seed_values(grid, **{VALUE: xv, POLICY: policy})
            assert yv == pytest.approx(statistics.mean(seeds))
            edge = sorted(vertices[vertices[:, 0] == xv][:, 1])
            assert edge[0] == pytest.approx(yv - statistics.stdev(seeds))
            assert edge[-1] == pytest.approx(yv + statistics.stdev(seeds))
        offsets = sorted(map(tuple, dot.get_offsets()))
        assert offsets == sorted((v, m) for v in values for m in seed_values(grid, **{VALUE: v, POLICY: policy}))


def test_by_axis_a_tied_partner_does_not_split_lines_and_text_is_categorical(tmp_path):
    low, high, dual = "policy.loss.clip_low", "policy.loss.clip_high", "policy.loss.dual_clip_c"
    points = [{low: lo, high: hi, dual: c, "optim.lr": lr} for lo, hi in ((0.1, 0.14), (0.2, 0.2), (0.2, 0.28))
              for c in (None, 3.0) for lr in (1e-4, 1e-2)]
    results = load_results(fake_sweep(tmp_path / "clip", points, [0, 1], lambda p, seed, s: p[high] + 0.01 * seed))
    panels = {ax.get_xlabel(): ax for ax in by_axis_figure(results).axes if ax.get_visible()}
    # clip_high determines clip_low (they are tied): its lines are one per (dual_clip_c, lr), each over the three pairs
    lines = panels[high].get_lines()
    assert len(lines) == 4 and all(list(line.get_xdata()) == [0.14, 0.2, 0.28] for line in lines)
    assert all(low not in line.get_label() for line in lines)
    # clip_low does not determine clip_high: every configuration stands alone there
    assert len(panels[low].get_lines()) == 12
    assert [t.get_text() for t in panels[dual].get_xticklabels()] == ["3", "None"]
    assert panels["optim.lr"].get_xscale() == "log" and panels[high].get_xscale() == "linear"
    names = [t.get_text() for t in parallel_figure(results).axes[0].get_xticklabels()]
    assert names[:4] == [low, high, dual, "log optim.lr"]  # two decades and more: a log axis


def test_curves_every_trial_by_rank_dashed_when_not_done(grid):
    ax = curves_figure(grid).axes[0]
    trials = [line for line in ax.get_lines() if line.get_linestyle() in ("-", "--")]
    assert len(trials) == 27
    dashed = [line for line in trials if line.get_linestyle() == "--"]
    assert len(dashed) == 3 and all(list(line.get_xdata()) == [1, 2, 3] for line in dashed)
    best = [line for line in trials if line.get_color() == PALETTE(0)]
    assert len(best) == 3 and all(list(line.get_xdata()) == list(range(1, 9)) for line in best)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == f"#1 {VALUE}=0.99 {POLICY}=0.95" and legend[-1] == "step 8" and len(legend) == 10


def test_parallel_coordinates_one_line_per_trial_with_the_metric(grid):
    ax = parallel_figure(grid).axes[0]
    trials = [line for line in ax.get_lines() if len(line.get_xdata()) == 4]
    assert len(trials) == 24  # 27 trials, the 3 stopped ones have no metric
    assert [t.get_text() for t in ax.get_xticklabels()] == [VALUE, POLICY, "seed", "validation/accuracy\n@ step 8"]
    best = trials[-1]  # drawn last, on top
    # the best: λ_value 0.99 on a linear axis from 0.95 to 1, the top of the metric's axis
    assert best.get_ydata()[0] == pytest.approx(0.8) and best.get_ydata()[-1] == 1.0


def test_nothing_drawn_before_a_trial_logs_the_metric_and_stale_files_go(tmp_path):
    results = load_results(fake_sweep(tmp_path / "early", [{"a": 1}, {"a": 2}], [0], lambda p, seed, s: None))
    out = tmp_path / "report"
    out.mkdir()
    (out / "heatmap.png").write_bytes(b"from an earlier report")
    assert draw_figures(results, out) == [] and list(out.iterdir()) == []


def test_a_configuration_of_stopped_seeds_ranks_after_completed_ones_and_is_marked(tmp_path):
    """The issue's tiny_cpu_lambda run: both λ = 1.0 seeds were stopped at step 20, one ran on to the end before the
    stop landed, with the best value of all; the report may not rank it first unmarked."""
    values = {0.9: 0.50, 0.95: 0.52, 1.0: 0.5586}
    sweep_dir = fake_sweep(tmp_path / "tiny", [{"advantage.lam": v} for v in values], [0, 1],
                           lambda p, seed, s: None if (p["advantage.lam"], seed) == (1.0, 1) and s > 20
                           else values[p["advantage.lam"]] - 0.01 * seed, step=30)
    records = json.loads((sweep_dir / "state.json").read_text())
    for record in records["trials"].values():
        if record["point"]["advantage.lam"] == 1.0:
            record["state"], record["reason"] = "stopped", "MedianStopping at step 20: ..."
    (sweep_dir / "state.json").write_text(json.dumps(records))
    results = load_results(sweep_dir)
    configs = results.configs
    assert list(configs["advantage.lam"]) == [0.95, 0.9, 1.0]
    assert list(configs["mean ± std"])[2] == "0.5586 (n=1, 2 stopped)"
    figure = by_axis_figure(results)
    ax = figure.axes[0]
    crosses = [c for c in ax.collections if c.get_paths() and len(c.get_offsets()) == 1
               and tuple(c.get_offsets()[0]) == (1.0, pytest.approx(0.5586))]
    assert len(crosses) == 1 and tuple(crosses[0].get_facecolor()[0]) == (1, 1, 1, 1)  # a hollow ✕, not a dot
    # the title fits inside the figure, although one panel is narrow
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    box, page = figure._suptitle.get_window_extent(renderer), figure.bbox
    assert "stopped seeds" in figure._suptitle.get_text().replace("\n", " ")
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and box.y1 <= page.y1
    assert "(2 stopped)" in " ".join(t.get_text() for t in curves_figure(results).axes[0].get_legend().get_texts())
    history = history_figure(results).axes[0]
    best_line = [line for line in history.get_lines() if line.get_label() == "best so far"][0]
    # configurations 1, 2 in the order tried (λ 0.9, 0.95), then λ 1.0 whose stopped seed is not the "best so far"
    assert list(best_line.get_xdata()) == [1, 2, 3]
    assert list(best_line.get_ydata()) == pytest.approx([0.495, 0.515, 0.515])


@pytest.mark.slow
def test_importance_finds_the_path_the_metric_depends_on(tmp_path):
    """The metric follows λ_value alone (λ_policy only adds a ±0.001 wiggle): PED-ANOVA gives λ_value nearly all of
    the importance, in the report's table and its figure alike."""
    points = [{VALUE: v, POLICY: p} for v in (0.9, 0.93, 0.96, 0.99) for p in (0.9, 0.93, 0.96, 0.99)]
    results = load_results(fake_sweep(tmp_path / "one_matters", points, [0], lambda pt, seed, s: 1 - 5 * abs(
        pt[VALUE] - 0.96) + 0.001 * ((pt[POLICY] * 100) % 2)))
    table = importances(results)
    assert list(table["path"]) == [VALUE, POLICY] and table["importance"].sum() == pytest.approx(1.0)
    assert table["importance"][0] > 0.9
    bars = importance_figure(results).axes[0].patches
    assert [bar.get_width() for bar in bars] == pytest.approx(list(table["importance"]))
    assert importances(load_results(fake_sweep(tmp_path / "few", points[:3], [0], lambda pt, seed, s: 0.5))) is None
