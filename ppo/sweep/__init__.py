"""Hyperparameter sweeps: a sweep file, its trials, their state, early stopping, and the results.

A sweep file (``sweeps/*.py``) defines ``SWEEP = Sweep(...)`` from the names exported here; ``launch.py`` hands it
to :mod:`ppo.sweep.cli`.

- :mod:`~ppo.sweep.axes`: ``Grid``, ``Tied``, ``Points``, ``Random`` (``Uniform``, ``LogUniform``, ``Choice``).
- :mod:`~ppo.sweep.search`: ``Search`` (``IntUniform`` besides the distributions above): an Optuna study chooses
  the configurations one at a time.
- :mod:`~ppo.sweep.stopping`: ``EarlyStopping`` (gates, ``Divergence``, ``SuccessiveHalving``/``MedianStopping``).
- :mod:`~ppo.sweep.spec`: ``Sweep``, ``Budget``, loading a sweep file.
- :mod:`~ppo.sweep.trials`: trials and their ids.
- :mod:`~ppo.sweep.plan`: validation of every trial before anything launches; :mod:`~ppo.sweep.dryrun`.
- :mod:`~ppo.sweep.state`: the sweep directory and ``state.json``.
- :mod:`~ppo.sweep.local`, :mod:`~ppo.sweep.slurm`: trials as child processes, or as a submitit job array.
- :mod:`~ppo.sweep.runner`: submission, polling, early stopping, resume.
- :mod:`~ppo.sweep.results`, :mod:`~ppo.sweep.figures`, :mod:`~ppo.sweep.page`, :mod:`~ppo.sweep.export`: tables,
  the figures (PNG, SVG), the HTML report, and the best configuration as an experiment file
  (``analysis/sweep_report.py``).

Importing this package loads no Fiddle (the sweep-file names only).
"""

from ppo.sweep.axes import Choice, Grid, LogUniform, Points, Random, Tied, Uniform
from ppo.sweep.search import IntUniform, Search
from ppo.sweep.spec import Budget, Sweep
from ppo.sweep.stopping import Divergence, EarlyStopping, MedianStopping, SuccessiveHalving

__all__ = ["Budget", "Choice", "Divergence", "EarlyStopping", "Grid", "IntUniform", "LogUniform", "MedianStopping",
           "Points", "Random", "Search", "SuccessiveHalving", "Sweep", "Tied", "Uniform"]
