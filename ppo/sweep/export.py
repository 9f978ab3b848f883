"""``--export-best``: a sweep's winning configuration as an experiment file that ``launch.py`` runs.

The file imports the sweep's base experiment by path (relative to the repository root when it lies inside it) when
it is imported, so classes the base defines resolve when a job loads the run directory's copy, and its
``config()`` is the base's ``config()`` with the sweep's fiddlers, its common overrides and the winning point's
overrides applied, in that order, through the launcher's own override parser.  The seed is the base's (the
configuration was measured over several); add ``seed=N`` on the command line for another.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ppo.config.errors import ConfigError
from ppo.launch.rundir import REPO_ROOT
from ppo.sweep.results import SweepResults
from ppo.sweep.trials import override_text

TEMPLATE = '''"""{title}

{summary}
Exported by analysis/sweep_report.py --export-best from {sweep_dir} on {date}.

    python launch.py {usage} --dry-run
"""

from pathlib import Path

from ppo.config.loading import load_module
from ppo.config.overrides import apply_override
from ppo.launch.rundir import REPO_ROOT

BASE = {base!r}  # {base_note}
FIDDLERS = {fiddlers!r}
OVERRIDES = [
{overrides}]

_base = load_module(Path(BASE) if Path(BASE).is_absolute() else REPO_ROOT / BASE)


def config():
    cfg = _base.config()
    for name in FIDDLERS:
        getattr(_base, name)(cfg)
    for override in OVERRIDES:
        apply_override(cfg, override)
    return cfg
'''


def best_point(results: SweepResults, rank: int = 1) -> tuple[dict, dict]:
    """The ``rank``-th configuration's row and its point (``{path: value}``, the values as the sweep set them)."""
    configs = results.configs
    ranked = configs[configs["n"] > 0]
    if len(ranked) < rank:
        raise ConfigError(f"{results.dir}: no configuration has {results.metric} at step {results.sweep['step']} "
                          f"yet, so there is no best one to export")
    row = ranked.iloc[rank - 1]
    return dict(row), results.points[row["config_id"]]


def export_best(results: SweepResults, out: str | Path, rank: int = 1) -> Path:
    """Write the winning configuration to ``out`` (a new .py file); returns its path."""
    out = Path(out)
    if out.suffix != ".py":
        raise ConfigError(f"--export-best needs a .py path, got {out}")
    if out.exists():
        raise ConfigError(f"{out} exists; choose another path for the exported experiment")
    row, point = best_point(results, rank)
    sweep = results.sweep
    base = Path(sweep["base"]).resolve()
    try:
        base_text, note = str(base.relative_to(REPO_ROOT)), "relative to the repository root"
    except ValueError:
        base_text, note = str(base), "absolute: the base lies outside the repository"
    overrides = [*sweep.get("common_overrides", []), *(override_text(p, v) for p, v in point.items())]
    title = f"The best configuration of sweep {sweep['id']}: {sweep['metric']} {row['mean ± std']} at step " \
            f"{sweep['step']}."
    shown = " ".join(override_text(p, v) for p, v in point.items()) or "the base"
    summary = (f"Rank {rank} of {len(results.configs)} configuration(s) ({sweep['mode']} {sweep['metric']}), "
               f"configuration {row['config_id']}: {shown}.")
    text = TEMPLATE.format(title=title, summary=summary, sweep_dir=results.dir, date=dt.date.today().isoformat(),
                           usage=out, base=base_text, base_note=note, fiddlers=list(sweep.get("fiddlers", [])),
                           overrides="".join(f"    {o!r},\n" for o in overrides))
    compile(text, str(out), "exec")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out
