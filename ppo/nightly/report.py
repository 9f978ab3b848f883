"""The regression dashboard's content: the recipes × nights matrix, and a section per recipe.

:func:`build_dashboard` reads a history directory (:mod:`ppo.nightly.history`) and returns one offline HTML page
(:mod:`ppo.nightly.page`):

1. the matrix: a row per recipe (those whose latest night failed first, then infrastructure failures, then
   passes), a column per night (oldest left), each cell coloured PASS / FAIL / INFRA-FAIL and listing the failing
   checks with their values and messages (or the INFRA-FAIL reason), the commit and the config hash; a cell that
   starts a regression is marked and links to its explanation;
2. per recipe, in the same order: the latest night's facts and checks; each regression in the window
   (:mod:`ppo.nightly.regressions`: the commits in between and the flattened-config diff); each checked value over
   the nights with its thresholds; the latest night's key-metric curves over the recipe's baseline band when one
   exists;
3. the files of the history that could not be read.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppo.metrics.encoding import format_value
from ppo.metrics.samples import SAMPLES
from ppo.nightly.figures import STATUS_COLORS, check_history_figure, curves_figure
from ppo.nightly.history import History, NightRecord, load_history
from ppo.nightly.page import figure_block, render_page, text
from ppo.nightly.regressions import Regression, explain, find_regressions

DEFAULT_NIGHTS = 30

STYLES = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 20px; color: #212121; font-size: 14px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 36px; border-bottom: 2px solid #ccc; }
h3 { font-size: 15px; margin-top: 20px; }
.meta { color: #616161; }
table { border-collapse: collapse; }
table.matrix td, table.matrix th { border: 1px solid #fff; padding: 6px; vertical-align: top; font-size: 12px; }
table.matrix th { background: #eceff1; }
table.matrix td.cell { min-width: 120px; max-width: 260px; }
td.PASS { background: #c8e6c9; } td.FAIL { background: #ffcdd2; } td.INFRA-FAIL { background: #e0e0e0; }
td.none { background: #fafafa; color: #9e9e9e; text-align: center; }
.status { font-weight: bold; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 3px; color: #fff; font-size: 12px; }
.badge.PASS { background: #2e7d32; } .badge.FAIL { background: #c62828; } .badge.INFRA-FAIL { background: #757575; }
.regression-mark { display: inline-block; margin-left: 4px; background: #6a1b9a; color: #fff; padding: 0 4px;
  border-radius: 3px; font-size: 11px; }
ul.failing { margin: 4px 0 0 0; padding-left: 16px; }
code { font-size: 12px; background: #f5f5f5; padding: 0 2px; }
.small { font-size: 11px; color: #616161; }
table.facts td, table.checks td, table.checks th { border-bottom: 1px solid #eee; padding: 3px 8px; font-size: 13px;
  vertical-align: top; }
pre { background: #f5f5f5; padding: 8px; overflow-x: auto; font-size: 12px; max-height: 400px; }
pre .add { color: #1b5e20; } pre .del { color: #b71c1c; } pre .hunk { color: #6a1b9a; }
.plot { width: 100%; }
"""


def build_dashboard(
    history_dir: str | Path,
    *,
    repo: str | Path | None = ".",
    nights: int = DEFAULT_NIGHTS,
    title: str = "Nightly regression dashboard",
) -> str:
    """The dashboard page for ``history_dir``, showing its last ``nights`` nights."""
    history = load_history(history_dir)
    return render_dashboard(history, repo=repo, nights=nights, title=title, source=str(history_dir))


def render_dashboard(
    history: History, *, repo: str | Path | None, nights: int, title: str, source: str = ""
) -> str:
    shown_nights = history.nights[-nights:] if nights > 0 else history.nights
    by_recipe = history.by_recipe()
    regressions: dict[str, list[Regression]] = {}
    for recipe, records in by_recipe.items():
        pairs = [(g, b) for g, b in find_regressions(records) if b.night in shown_nights]
        regressions[recipe] = [explain(g, b, repo) for g, b in pairs]
    recipes = sorted(history.recipes, key=lambda r: (_attention(by_recipe.get(r, [])), r))
    parts = [
        f"<h1>{text(title)}</h1>",
        f'<p class="meta">{text(source)} — {len(history.recipes)} recipes, {len(history.nights)} nights'
        f"{_window_note(shown_nights, history.nights)}; generated {text(_now())}</p>",
    ]
    if not history.records:
        parts.append("<p>No night records yet: run <code>analysis/nightly.py run SUITE --history DIR</code>.</p>")
    else:
        parts.append(_latest_summary(history.nights[-1], history.records))
        parts.append(_matrix(recipes, shown_nights, by_recipe, regressions))
        for recipe in recipes:
            records = [r for r in by_recipe.get(recipe, []) if r.night in shown_nights]
            parts.append(_recipe_section(recipe, records, history, regressions.get(recipe, [])))
    if history.problems:
        items = "".join(f"<li>{text(p)}</li>" for p in history.problems)
        parts.append(f'<h2 id="problems">Unreadable files</h2><ul>{items}</ul>')
    return render_page(title, "\n".join(parts), styles=STYLES)


def _attention(records: Sequence[NightRecord]) -> int:
    """Recipes whose latest night failed come first, then infrastructure failures, then passes."""
    if not records:
        return 3
    return {"FAIL": 0, "INFRA-FAIL": 1, "PASS": 2}[records[-1].status]


def _latest_summary(night: str, records: Sequence[NightRecord]) -> str:
    tonight = [r for r in records if r.night == night]
    counts = {s: sum(r.status == s for r in tonight) for s in STATUS_COLORS}
    badges = " ".join(f'<span class="badge {s}">{n} {s}</span>' for s, n in counts.items() if n)
    return f"<p>Latest night {text(night)}: {badges}</p>"


def anchor(*parts: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in parts)


def format_check_value(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(format_check_value(v) for v in value) + ")"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format_value(float(value))
    return format_value(value) if value is not None else "N/A"


def _matrix(
    recipes: Sequence[str], nights: Sequence[str], by_recipe: dict[str, list[NightRecord]],
    regressions: dict[str, list[Regression]],
) -> str:
    head = "".join(f"<th>{text(n)}</th>" for n in nights)
    rows = []
    for recipe in recipes:
        latest = {r.night: r for r in by_recipe.get(recipe, [])}
        starts = {reg.bad.night for reg in regressions.get(recipe, [])}
        cells = []
        for night in nights:
            record = latest.get(night)
            if record is None:
                cells.append('<td class="cell none">—</td>')
                continue
            cells.append(_cell(record, regression=night in starts))
        link = f'<a href="#{anchor("recipe", recipe)}">{text(recipe)}</a>'
        rows.append(f"<tr><th>{link}</th>{''.join(cells)}</tr>")
    legend = " ".join(f'<span class="badge {s}">{s}</span>' for s in STATUS_COLORS)
    return (
        f'<h2 id="matrix">Recipes × nights</h2><p class="small">{legend} '
        '<span class="regression-mark">regression</span> = first FAIL after a PASS</p>'
        f'<table class="matrix"><tr><th>recipe</th>{head}</tr>{"".join(rows)}</table>'
    )


def _cell(record: NightRecord, *, regression: bool) -> str:
    body = [f'<span class="status">{text(record.status)}</span>']
    if regression:
        target = anchor("regression", record.recipe, record.night)
        body.append(f'<a class="regression-mark" href="#{target}">regression</a>')
    if record.status == "INFRA-FAIL":
        body.append(f"<div>{text(_shorten(record.reason, 200))}</div>")
    failing = [c for c in record.failing_checks if c.get("status") == "FAIL"]
    if failing:
        items = "".join(
            f"<li><code>{text(c['check'])}</code> = {text(format_check_value(c.get('value')))}"
            + (f' <span class="small">{text(_shorten(c["message"], 120))}</span>' if c.get("message") else "")
            + "</li>"
            for c in failing
        )
        body.append(f'<ul class="failing">{items}</ul>')
    elif record.status == "PASS":
        body.append(f'<div class="small">{len(record.checks)} checks pass</div>')
    body.append(
        f'<div class="small">commit {text(_short(record.git_commit))} · config {text(_short(record.config_hash))}</div>'
    )
    tooltip = f"{record.recipe} {record.night}: {record.status}"
    return f'<td class="cell {record.status}" title="{text(tooltip)}">{"".join(body)}</td>'


def _recipe_section(
    recipe: str, records: Sequence[NightRecord], history: History, regressions: Sequence[Regression]
) -> str:
    parts = [f'<h2 id="{anchor("recipe", recipe)}">{text(recipe)}</h2>']
    baseline = history.baselines.get(recipe)
    if not records:
        parts.append("<p>No night in the window.</p>")
    else:
        latest = records[-1]
        parts.append(_facts(latest))
        parts.append(_checks_table(latest))
    for regression in regressions:
        parts.append(_regression(regression))
    history_fig = check_history_figure(records) if records else None
    if history_fig is not None:
        parts.append("<h3>Checked values over nights (dashed: thresholds)</h3>")
        parts.append(figure_block(history_fig, anchor("plot", recipe, "checks")))
    latest_with_curves = next((r for r in reversed(records) if r.curves), None)
    if latest_with_curves is not None or baseline is not None:
        night = latest_with_curves.night if latest_with_curves else "no night"
        note = "" if baseline else (
            ' <span class="small">(no baseline band: run <code>analysis/nightly.py baseline</code>)</span>'
        )
        parts.append(f"<h3>Key metrics of {text(night)} over the baseline band{note}</h3>")
        shown = latest_with_curves or NightRecord(recipe=recipe, night="none", status="INFRA-FAIL")
        curves = curves_figure(shown, baseline)
        if curves is not None:
            parts.append(figure_block(curves, anchor("plot", recipe, "curves")))
    return "\n".join(parts)


def _facts(record: NightRecord) -> str:
    steps = f"{record.last_step if record.last_step is not None else '—'}"
    if record.step_needed is not None:
        steps += f" (checks need {record.step_needed})"
    dirty = " (dirty)" if record.git_dirty else ""
    versions = ", ".join(f"{k} {v}" for k, v in sorted((record.versions or {}).items()))
    launch = record.launch or {}
    rows = [
        ("latest night", f'{text(record.night)} <span class="badge {record.status}">{text(record.status)}</span>'),
        ("reason", text(record.reason) if record.reason else ""),
        ("experiment", f"<code>{text(record.experiment or '—')}</code> "
                       + " ".join(f"<code>{text(o)}</code>" for o in record.overrides)),
        ("executor", text(record.executor or "—")),
        ("last step", text(steps)),
        ("launch exit code", text(launch.get("exit_code", "—")) if record.launch else "— (recorded run)"),
        ("commit", f"<code>{text(record.git_commit or '—')}</code>{dirty}"),
        ("config hash", f"<code>{text(record.config_hash or '—')}</code>"),
        ("run directory", f"<code>{text(record.run_dir or '—')}</code>"),
        ("wandb", text(record.wandb_url) if record.wandb_url else "—"),
        ("wall time", text(_duration(record.wall_time_s))),
        ("versions", text(versions or "—")),
    ]
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows if v != "")
    return f'<table class="facts">{body}</table>'


def _checks_table(record: NightRecord) -> str:
    if not record.checks:
        return "<p>No checks.</p>"
    rows = "".join(
        f'<tr><td><span class="badge {text(c["status"])}">{text(c["status"])}</span></td>'
        f"<td><code>{text(c['check'])}</code></td><td>{text(format_check_value(c.get('value')))}</td>"
        f"<td>{text(c.get('message', ''))}</td></tr>"
        for c in record.checks
    )
    return (
        f"<h3>Checks on {text(record.night)}</h3>"
        f'<table class="checks"><tr><th>status</th><th>check</th><th>value</th><th>message</th></tr>{rows}</table>'
    )


def _regression(regression: Regression) -> str:
    good, bad = regression.good, regression.bad
    target = anchor("regression", bad.recipe, bad.night)
    parts = [
        f'<h3 id="{target}">Regression: {text(good.night)} PASS → {text(bad.night)} FAIL</h3>',
        f"<p>commits <code>{text(_short(good.git_commit))}</code> → <code>{text(_short(bad.git_commit))}</code>; "
        f"config <code>{text(_short(good.config_hash))}</code> → <code>{text(_short(bad.config_hash))}</code></p>",
    ]
    if regression.commits:
        parts.append(f"<p>Commits in between ({len(regression.commits)}):</p>")
        parts.append("<pre>" + "\n".join(text(line) for line in regression.commits) + "</pre>")
    if regression.commits_note:
        parts.append(f'<p class="small">Commits: {text(regression.commits_note)}. '
                     f"Passing <code>{text(good.git_commit or '—')}</code>, "
                     f"failing <code>{text(bad.git_commit or '—')}</code>.</p>")
    if regression.config_diff:
        parts.append("<p>Flattened config diff:</p>")
        parts.append("<pre>" + "\n".join(_diff_line(line) for line in regression.config_diff) + "</pre>")
    else:
        parts.append(f'<p class="small">Config: {text(regression.config_note)}.</p>')
    parts.append(_samples(good, bad))
    return "\n".join(parts)


SAMPLES_SHOWN = 3


def last_samples(record: NightRecord) -> Path | None:
    """The night's last samples file (``<run_dir>/samples/step_N.jsonl``, N the largest), or None."""
    folder = Path(record.run_dir) / SAMPLES if record.run_dir else None
    files = list(folder.glob("step_*.jsonl")) if folder is not None and folder.is_dir() else []
    return max(files, key=lambda f: int(f.stem.removeprefix("step_")), default=None)


def _samples(good: NightRecord, bad: NightRecord) -> str:
    """Both nights' last kept answers: where they are, and the first validation answers of each side by side."""
    files = {"passing": last_samples(good), "failing": last_samples(bad)}
    where = "; ".join(f"{side} <code>{text(path or '— (no samples kept)')}</code>" for side, path in files.items())
    parts = [f"<p>Samples: {where}</p>"]
    shown = {side: [r for r in _read_rows(path) if r.get("split") == "validation"][:SAMPLES_SHOWN]
             for side, path in files.items()}
    if any(shown.values()):
        parts.append('<table class="samples"><tr><th></th><th>problem</th><th>response</th><th>answer / truth</th>'
                     "<th>reward</th></tr>")
        for side, rows in shown.items():
            for row in rows:
                parts.append(f"<tr><td>{side}</td><td>{text(str(row.get('prompt', ''))[:120])}</td>"
                             f"<td><pre>{text(str(row.get('response', ''))[:300])}</pre></td>"
                             f"<td>{text(row.get('answer') or '—')} / {text(row.get('ground_truth'))}</td>"
                             f"<td>{text(row.get('reward'))}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts)


def _read_rows(path: Path | None) -> list[dict]:
    if path is None:
        return []
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return f"<b>{text(line)}</b>"
    if line.startswith("@@"):
        return f'<span class="hunk">{text(line)}</span>'
    if line.startswith("+"):
        return f'<span class="add">{text(line)}</span>'
    if line.startswith("-"):
        return f'<span class="del">{text(line)}</span>'
    return text(line)


def _window_note(shown: Sequence[str], all_nights: Sequence[str]) -> str:
    if not shown:
        return ""
    window = f", {shown[0]} … {shown[-1]}" if len(shown) > 1 else f", {shown[0]}"
    return window + (f" (the last {len(shown)} shown)" if len(shown) < len(all_nights) else "")


def _short(value: str | None) -> str:
    return value[:10] if value else "—"


def _shorten(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
