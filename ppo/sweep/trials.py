"""Trials: one (point, seed) of a sweep, with an id that depends only on what it trains.

A trial's id is the first 10 hex digits of the SHA-256 of a canonical JSON of its sorted overrides (``path`` and
``repr(value)``), its seed, and the overrides and fiddlers common to every trial, except those of ``executor.*``
(where a trial runs does not change what it trains, so ``--executor`` and ``executor.partition=...`` keep ids).
Adding a value to an axis therefore keeps the ids, and the finished trials, of the points that were there before.
The configuration id is the same hash without the seed: trials that differ only by seed share it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppo.config.errors import ConfigError
from ppo.sweep.axes import Point
from ppo.sweep.spec import LoadedSweep

ID_LENGTH = 10


def override_text(path: str, value: Any) -> str:
    return f"{path}={value!r}"


def _digest(payload: dict) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


def _identity(common: Sequence[str], fiddlers: Sequence[str]) -> dict:
    def where(override: str) -> bool:
        path = override.partition("=")[0].strip()
        return path == "executor" or path.startswith("executor.")

    kept = [o for o in common if not where(o)]
    return {"common": list(kept), "fiddlers": list(fiddlers)}


def config_id(point: Point, common: Sequence[str] = (), fiddlers: Sequence[str] = ()) -> str:
    return _digest({"overrides": sorted((p, repr(v)) for p, v in point.items()), **_identity(common, fiddlers)})


def trial_id(point: Point, seed: int, common: Sequence[str] = (), fiddlers: Sequence[str] = ()) -> str:
    return _digest({"overrides": sorted((p, repr(v)) for p, v in point.items()), "seed": seed,
                    **_identity(common, fiddlers)})


@dataclass(frozen=True)
class Trial:
    id: str
    index: int
    point: dict
    seed: int
    config_id: str
    overrides: tuple[str, ...]
    """Every override of the trial, in the order applied: common ones, the point's, then the seed."""

    def label(self) -> str:
        shown = " ".join(override_text(p, v) for p, v in self.point.items()) or "(base)"
        return f"{shown} seed={self.seed}"


def make_trials(loaded: LoadedSweep, extra_overrides: Sequence[str] = ()) -> list[Trial]:
    """Every trial of the sweep: points in axis order, each once per seed."""
    spec = loaded.spec
    common = [*spec.overrides, *extra_overrides]
    trials: list[Trial] = []
    seen: dict[str, int] = {}
    for point in loaded.points():
        if spec.seed_path in point:
            raise ConfigError(f"'{spec.seed_path}' is the sweep's seed path; list seeds in Sweep(seeds=...) instead "
                              f"of an axis (or set seed_path to another field)")
        for seed in spec.seeds:
            tid = trial_id(point, seed, common, spec.fiddlers)
            if tid in seen:
                raise ConfigError(f"the sweep lists the same trial twice: {Trial(tid, 0, point, seed, '', ()).label()}")
            seen[tid] = len(trials)
            texts = (*common, *(override_text(p, v) for p, v in point.items()), override_text(spec.seed_path, seed))
            trials.append(Trial(tid, len(trials), dict(point), seed, config_id(point, common, spec.fiddlers), texts))
    if spec.budget is not None and spec.budget.max_trials is not None and len(trials) > spec.budget.max_trials:
        raise ConfigError(f"the sweep has {len(trials)} trials, over its budget of {spec.budget.max_trials} "
                          f"(Budget.max_trials)")
    return trials
