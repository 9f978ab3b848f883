"""Learning curves of one or more runs from their ``metrics.jsonl``, as a static figure (SVG or PNG).

    python analysis/plot_runs.py runs/tiny_cpu-A runs/tiny_cpu-B --label "PPO + GAE" --label "raw reward" \\
        --metric validation/accuracy --metric train/reward --metric train/critic/explained_var \\
        --ylim train/critic/explained_var=-0.2,0.3 --out docs/figures/tiny_cpu.svg

One panel per metric, one line per run; a metric a run never logged is left out of that run's panel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ppo.metrics import load_metrics  # noqa: E402


def plot_runs(run_dirs: list[Path], labels: list[str], metrics: list[str], out: Path, title: str | None,
              ylims: dict[str, tuple[float, float]] | None = None) -> None:
    data = [load_metrics(d) for d in run_dirs]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for series, label in zip(data, labels):
            points = sorted((int(s), v) for s, v in series.get(metric, {}).items())
            if points:
                ax.plot(*zip(*points), marker="o" if len(points) < 30 else None, markersize=3, label=label)
        ax.set_title(metric, fontsize=10)
        if metric in (ylims or {}):
            ax.set_ylim(*ylims[metric])
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (or metrics.jsonl files)")
    parser.add_argument("--label", action="append", help="legend label per run (default: the directory name)")
    parser.add_argument("--metric", action="append", help="metric to plot (repeatable)")
    parser.add_argument("--title")
    parser.add_argument("--ylim", action="append", default=[], metavar="METRIC=LO,HI",
                        help="fix a panel's y range (e.g. to keep an early outlier from flattening the curve)")
    parser.add_argument("--out", type=Path, required=True, help="output file; .svg or .png")
    args = parser.parse_args(argv)
    labels = args.label or [p.name for p in args.runs]
    if len(labels) != len(args.runs):
        parser.error(f"{len(args.runs)} runs but {len(labels)} --label values")
    ylims = {}
    for item in args.ylim:
        metric, _, bounds = item.rpartition("=")
        try:
            lo, hi = (float(b) for b in bounds.split(","))
        except ValueError:
            parser.error(f"--ylim takes METRIC=LO,HI, got {item!r}")
        ylims[metric] = (lo, hi)
    try:
        plot_runs(args.runs, labels, args.metric or ["validation/accuracy"], args.out, args.title, ylims)
    except (FileNotFoundError, ValueError) as err:
        print(f"plot_runs: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
