"""Nightly runs and the regression dashboard (the CLIs are ``analysis/nightly.py`` and ``analysis/dashboard.py``).

- :mod:`~ppo.nightly.history`: the history directory's format — night records, baselines; read and write.
- :mod:`~ppo.nightly.suite`: suite files and experiments' ``NIGHTLY`` checks, checked before any launch.
- :mod:`~ppo.nightly.run_facts`: what a run directory says about itself (metrics, config, commit, versions).
- :mod:`~ppo.nightly.runner`: launch an entry, judge it PASS / FAIL / INFRA-FAIL, write its record.
- :mod:`~ppo.nightly.baseline`: the per-step band of a recipe over seeds.
- :mod:`~ppo.nightly.thresholds`: comparisons and thresholds read off check expressions.
- :mod:`~ppo.nightly.regressions`: first FAIL after a PASS, the commits and the config diff in between.
- :mod:`~ppo.nightly.figures`: the plotly figures.
- :mod:`~ppo.nightly.page`: the offline, self-auditing HTML page.
- :mod:`~ppo.nightly.report`: the dashboard's content.

The plotting modules import plotly; the rest needs only the standard library, :mod:`ppo.metrics` and
:mod:`ppo.launch.rundir`.
"""

from ppo.nightly.history import (
    KEY_METRICS,
    Baseline,
    History,
    HistoryError,
    NightRecord,
    load_history,
    read_record,
    write_baseline,
    write_record,
)
from ppo.nightly.suite import Nightly, SuiteEntry, SuiteError, load_suite, read_nightly

__all__ = [
    "KEY_METRICS",
    "Baseline",
    "History",
    "HistoryError",
    "NightRecord",
    "Nightly",
    "SuiteEntry",
    "SuiteError",
    "load_history",
    "load_suite",
    "read_nightly",
    "read_record",
    "write_baseline",
    "write_record",
]
