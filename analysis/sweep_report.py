"""A sweep's results: tables per trial and per configuration (CSV, Markdown), figures (PNG, SVG), an HTML page.

    python analysis/sweep_report.py runs/sweeps/<name> [--out DIR] [--top K]
    python analysis/sweep_report.py runs/sweeps/<name> --export-best experiments/<name>_best.py [--rank R]

Writes into DIR (default SWEEP_DIR/report): trials.csv (one row per trial: swept values, seed, status and reason,
steps reached, the metric at the sweep's step and its best, step time), configs.csv (one row per configuration,
seeds aggregated: mean ± std and n, sorted best first), report.md (both tables), the figures as PNG and SVG
(by_axis: the metric against each swept path with seed bands; heatmap: a two-path grid; curves: every trial;
parallel: parallel coordinates; history: the metric in trial order with the best so far; importance: each swept
path's PED-ANOVA importance, also in importance.csv; see ppo/sweep/figures.py), and report.html (a
self-contained page: those figures, the metric curves of the K best configurations, both tables; nothing on it
needs WebGL).  The configuration table
also goes to standard output.  It reads the sweep directory only, so it works while the sweep runs.

--export-best writes the winning configuration (or the R-th) as an experiment file that launch.py runs.

Exit status: 0 written; 2 a bad command line or sweep directory, one line on standard error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

try:
    import ppo  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppo.config.errors import ConfigError

PROG = "sweep_report.py"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, metavar="SWEEP_DIR", help="the sweep directory (runs/sweeps/<name>)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where to write the report (default SWEEP_DIR/report)")
    parser.add_argument("--top", type=int, default=3, metavar="K", help="configurations whose curves are drawn")
    parser.add_argument("--export-best", type=Path, metavar="FILE.py", help="write the best configuration as an "
                        "experiment file")
    parser.add_argument("--rank", type=int, default=1, metavar="R", help="export the R-th configuration instead")
    return parser


def write_report(results, out: Path, top: int) -> list[Path]:
    from ppo.sweep.figures import draw_figures
    from ppo.sweep.importance import importances
    from ppo.sweep.page import render
    from ppo.sweep.results import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    sweep = results.sweep
    trial_cols = ["trial", *results.axes, "seed", "status", "steps", "metric", "best", "best_step", "step_time",
                  "attempts", "reason"]
    config_cols = ["rank", *results.axes, "mean ± std", "n", "best", "steps", "step_time", "done", "stopped",
                   "failed", "active", "config_id"]
    scores = importances(results)
    markdown = "\n".join([
        f"# Sweep {sweep['id']}", "",
        f"{sweep['metric']} at step {sweep['step']} ({sweep['mode']}); base `{sweep['base']}`; "
        f"{len(results.trials)} trial(s).", "", best_line(results), "",
        "## Configurations (seeds aggregated, best first)", "",
        "Configurations with seeds stopped early rank after the completed ones (`K stopped` in `mean ± std`).", "",
        markdown_table(results.configs, config_cols), "",
        "## Importance (PED-ANOVA over the completed configurations)", "",
        markdown_table(scores) if scores is not None else "(too few completed configurations)", "",
        "## Trials", "", markdown_table(results.trials, trial_cols), "",
    ])
    paths = [out / "trials.csv", out / "configs.csv", out / "report.md", out / "report.html"]
    results.trials.to_csv(paths[0], index=False)
    results.configs.to_csv(paths[1], index=False)
    if scores is not None:
        scores.to_csv(out / "importance.csv", index=False)
        paths.append(out / "importance.csv")
    else:
        (out / "importance.csv").unlink(missing_ok=True)
    paths[2].write_text(markdown)
    drawn = draw_figures(results, out)
    paths[3].write_text(render(results, top, drawn))
    return paths + [path for d in drawn for path in (d.png, d.svg)]


def best_line(results) -> str:
    """The best configuration so far, and whether its rank is that of a configuration that ran to the end."""
    from ppo.sweep.results import config_label

    ranked = results.configs.dropna(subset=["mean"])
    if ranked.empty:
        return "Best so far: none yet (no configuration has the metric at the sweep's step)."
    best = ranked.iloc[0]
    caveat = " (every configuration with the metric had a seed stopped early)" if best["stopped"] else ""
    return f"Best so far: #{best['rank']} {config_label(results.axes, best)}: {best['mean ± std']}{caveat}."


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        from ppo.sweep.results import load_results

        if args.top < 1 or args.rank < 1:
            raise ConfigError("--top and --rank must be >= 1")
        results = load_results(args.sweep_dir)
        if args.export_best is not None:
            from ppo.sweep.export import export_best

            path = export_best(results, args.export_best, args.rank)
            print(f"wrote {path}; run it with: python launch.py {path}")
            return 0
        paths = write_report(results, args.out or args.sweep_dir / "report", args.top)
    except ConfigError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    from ppo.sweep.results import markdown_table

    print(markdown_table(results.configs, ["rank", *results.axes, "mean ± std", "best", "steps", "done", "stopped",
                                           "failed", "active"]))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
