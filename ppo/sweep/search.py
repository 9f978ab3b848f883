"""Model-based search: a sweep whose configurations an Optuna study chooses, one at a time, from the results so far.

``Sweep(search=Search({path: distribution}, n_trials=16, sampler="tpe"))`` instead of expanding axes up front: when a
slot frees, the driver asks the study for the next configuration (Optuna's ask/tell), runs it once per seed, and
tells the study its outcome (the sweep's metric at the sweep's step, the mean over the seeds that got there), or that
early stopping pruned it.  The study lives in the sweep directory as Optuna's journal file (``study.journal``: an
append-only log that works on a shared filesystem without a server) or in the database ``storage`` names
(``sqlite:///...``, ``postgresql://...``).  Resuming the sweep loads the same study: its trials keep their numbers,
and only the missing ones are asked.

Distributions: ``Uniform(low, high)``, ``LogUniform(low, high)``, ``IntUniform(low, high)`` (integers, both ends
included) and ``Choice([...])``.  Samplers: ``tpe`` (default), ``random``, ``grid`` (every combination of
``Choice``/``IntUniform`` values, in Optuna's order) and ``cmaes`` (Optuna's CMA-ES; the ``cmaes`` package is
pinned in pyproject).

Optuna is imported only when a study is opened, so importing :mod:`ppo.sweep` stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppo.config.errors import ConfigError
from ppo.sweep.axes import Choice, LogUniform, Uniform, _check_path

SAMPLERS = ("tpe", "random", "grid", "cmaes")
JOURNAL = "study.journal"
"""The study's journal file in the sweep directory (the default storage)."""


@dataclass(frozen=True)
class IntUniform:
    """An integer from ``low`` to ``high``, both included (``log=True``: uniform in log space)."""

    low: int
    high: int
    log: bool = False

    def check(self, path: str) -> None:
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (self.low, self.high))
        if not ints or self.low > self.high or (self.log and self.low < 1):
            raise ConfigError(f"Search: IntUniform for '{path}' needs ints {'1 <= ' if self.log else ''}low <= high, "
                              f"got ({self.low!r}, {self.high!r})")


Distribution = Uniform | LogUniform | IntUniform | Choice


@dataclass(frozen=True)
class Search:
    space: Mapping[str, Distribution]
    n_trials: int
    sampler: str = "tpe"
    seed: int = 0
    storage: str | None = None
    retries: int = 1
    """Times a trial that crashes (its process or job ends without completing, not a stop) is relaunched in the same
    call of the sweep, from its checkpoints; after that its study trial is told failed."""

    def check(self) -> None:
        if not isinstance(self.space, Mapping) or not self.space:
            raise ConfigError("Search needs a dict {path: Uniform(...)|LogUniform(...)|IntUniform(...)|Choice([...])}")
        for path, dist in self.space.items():
            _check_path(path, "Search")
            if not isinstance(dist, (Uniform, LogUniform, IntUniform, Choice)):
                raise ConfigError(f"Search: '{path}' needs Uniform, LogUniform, IntUniform or Choice, got {dist!r}")
            try:
                dist.check(path)
            except ConfigError as err:
                raise ConfigError(str(err).replace("Random:", "Search:")) from None
        if isinstance(self.n_trials, bool) or not isinstance(self.n_trials, int) or self.n_trials < 1:
            raise ConfigError(f"Search: n_trials must be a positive int, got {self.n_trials!r}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"Search: unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        if self.sampler == "grid" and any(isinstance(d, (Uniform, LogUniform)) for d in self.space.values()):
            raise ConfigError("Search: the grid sampler needs Choice or IntUniform for every path (a grid of values)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"Search: seed must be an int, got {self.seed!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"Search: retries must be an int >= 0, got {self.retries!r}")
        if self.storage is not None and (not isinstance(self.storage, str) or "://" not in self.storage):
            raise ConfigError(f"Search: storage must be a database URL (sqlite:///..., postgresql://...), got "
                              f"{self.storage!r}")

    def bounds(self) -> list[dict[str, Any]]:
        """Points that put every path at each end of its range (each Choice option once): the dry run prepares each
        of them, so a bound the base refuses fails before anything launches."""
        ends = {path: _ends(dist) for path, dist in self.space.items()}
        width = max(len(v) for v in ends.values())
        return [{path: values[min(i, len(values) - 1)] for path, values in ends.items()} for i in range(width)]

    def describe(self) -> list[str]:
        return [f"{path}: {_describe(dist)}" for path, dist in self.space.items()]


def _ends(dist: Distribution) -> list:
    return list(dist.options) if isinstance(dist, Choice) else [dist.low, dist.high]


def _describe(dist: Distribution) -> str:
    if isinstance(dist, Choice):
        return f"Choice({list(dist.options)!r})"
    log = ", log" if isinstance(dist, LogUniform) or getattr(dist, "log", False) else ""
    return f"{type(dist).__name__} [{dist.low!r}, {dist.high!r}]{log}"


# ---------------------------------------------------------------------------------------------- the Optuna side
def optuna_distributions(search: Search) -> dict:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out = {}
    for path, dist in search.space.items():
        if isinstance(dist, Choice):
            out[path] = CategoricalDistribution(list(dist.options))
        elif isinstance(dist, IntUniform):
            out[path] = IntDistribution(dist.low, dist.high, log=dist.log)
        else:
            out[path] = FloatDistribution(float(dist.low), float(dist.high), log=isinstance(dist, LogUniform))
    return out


def _sampler(search: Search, session: int):
    """The sampler of one driver session: seeded with ``seed`` and the number of trials the study holds, so a
    resumed search draws new points instead of repeating the first session's random start."""
    import optuna

    seed = search.seed + 1_000_003 * session
    if search.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if search.sampler == "grid":
        grid = {p: list(d.options) if isinstance(d, Choice) else list(range(d.low, d.high + 1))
                for p, d in search.space.items()}
        return _grid_sampler(grid, seed)
    try:
        import cmaes  # noqa: F401
    except ImportError:
        raise ConfigError("Search: the cmaes sampler needs the cmaes package (pip install cmaes)") from None
    return optuna.samplers.CmaEsSampler(seed=seed)


def _grid_sampler(grid: dict, seed: int):
    """Optuna's grid sampler without its ``study.stop()`` once every grid point was visited: that works only inside
    ``study.optimize``, and a tell outside it (the driver's, an array element's) raised ``RuntimeError``.  The sweep
    stops at ``n_trials`` itself."""
    import optuna

    class AskTellGrid(optuna.samplers.GridSampler):
        def after_trial(self, study, trial, state, values) -> None:
            pass

    return AskTellGrid(grid, seed=seed)


def storage_url(search: Search, sweep_dir: Path) -> str:
    return search.storage or f"journal:{Path(sweep_dir) / JOURNAL}"


def open_study(search: Search, sweep_dir: Path, name: str, maximize: bool):
    """The sweep's study (created on first use, loaded afterwards); a storage that cannot be opened is one line."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if search.storage is None:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(Path(sweep_dir) / JOURNAL)))
    else:
        storage = _rdb(search.storage, create=True)
    direction = "maximize" if maximize else "minimize"
    study = optuna.create_study(study_name=name, storage=storage, sampler=_sampler(search, 0), direction=direction,
                                load_if_exists=True)
    held = len(study.get_trials(deepcopy=False))
    if held:
        study.sampler = _sampler(search, held)
    return study


def check_storage(search: Search) -> None:
    """A user-named database is opened (not written) by the dry run and before anything is created."""
    if search.storage is None:
        return
    _rdb(search.storage, create=False)


def _rdb(url: str, create: bool):
    """Optuna's RDB storage at ``url``; any failure to open it is one line naming the URL and the root cause."""
    import optuna

    try:
        return optuna.storages.RDBStorage(url, skip_table_creation=not create)
    except Exception as err:  # noqa: BLE001 - any driver's error is the same problem for the user
        while err.__cause__ is not None or err.__context__ is not None:
            err = err.__cause__ or err.__context__
        lines = str(err).strip().splitlines()
        raise ConfigError(f"Search: cannot open the study storage {url}: {lines[0] if lines else type(err).__name__}"
                          ) from None

