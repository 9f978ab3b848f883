"""The hub models and datasets an experiment names: what a dry run says of them, and what a launch fetches.

An experiment's input components (``Experiment.input_parts()``) declare the fields that may name a hub repository
instead of a local path (``HUB_FIELDS = {"path": "model"}``; a model is ``org/name[@revision]``, a dataset
``org/name[@revision][:config]:split``: :mod:`ppo.models.hub`, :mod:`ppo.data.hub`).  For each field that does:

- a dry run fetches nothing and writes nothing: :func:`dry_run_lines` says whether it is here (and where) or that a
  launch would fetch it; :func:`unavailable` lists what cannot be had from this host (``HF_HUB_OFFLINE`` set and
  not cached), which :mod:`ppo.launch.prepare` refuses wherever it refuses missing input paths;
- a launch (:func:`ppo.launch.prepare.prepare` without ``dry_run``, before anything is created or queued) resolves
  them (:func:`resolve`: from the cache, else fetched, one line on stderr each) and :func:`pin` writes the local
  paths into the config, marked ``# <- fetched <id>``.  The run directory's ``config.json`` therefore names the
  snapshot folder (``<HF cache>/models--Qwen--Qwen2.5-1.5B/snapshots/<commit>``: the exact commit) and the
  fetched parquet files: the job never contacts the hub nor reads ``HF_HOME``/``PPO_DATA_ROOT`` on its nodes,
  but it reads those paths, so the HF cache and ``PPO_DATA_ROOT`` must be on a filesystem the nodes see, as the
  run directory must be (inside a container: mounted, ``executor.container_mounts``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppo.config import overrides as ov
from ppo.data.hub import HubDataset, cached_snapshot, data_root, dataset_file, fetch_dataset, parse_dataset_id
from ppo.data.hub import offline_refusal as dataset_refusal
from ppo.hub import HubError, hub_cache, offline
from ppo.models.hub import HubModel, cached_model, fetch_model, parse_model_id
from ppo.models.hub import offline_refusal as model_refusal

PARSERS = {"model": parse_model_id, "dataset": parse_dataset_id}


@dataclass(frozen=True)
class HubInput:
    """A config field (``where``, e.g. ``model.path``) that names a hub model or dataset (``ref``)."""

    where: str
    ref: HubModel | HubDataset

    def local(self) -> Path | None:
        """Where it is on this machine, or None; never uses the network."""
        if isinstance(self.ref, HubModel):
            return cached_model(self.ref)
        file = dataset_file(self.ref)
        return file if file.is_file() else None

    def refusal(self) -> HubError | None:
        """The error a launch from this host would stop with because ``HF_HUB_OFFLINE`` forbids fetching it, or
        None (it is here, can be made from the HF cache, or may be fetched)."""
        if not offline() or self.local() is not None:
            return None
        if isinstance(self.ref, HubModel):
            return model_refusal(self.ref)
        return None if cached_snapshot(self.ref) is not None else dataset_refusal(self.ref)

    def fetch(self) -> Path:
        return fetch_model(self.ref) if isinstance(self.ref, HubModel) else fetch_dataset(self.ref)

    def store(self) -> str:
        """Where it goes once fetched: the HF cache for models, ``PPO_DATA_ROOT`` for datasets."""
        return f"the HF cache ({hub_cache()})" if isinstance(self.ref, HubModel) else f"PPO_DATA_ROOT ({data_root()})"


def hub_inputs(experiment: Any) -> list[HubInput]:
    """Every field of the experiment's input components that names a hub model or dataset."""
    found = []
    for name, part in getattr(experiment, "input_parts", list)():
        for field, kind in getattr(part, "HUB_FIELDS", {}).items():
            ref = PARSERS[kind](getattr(part, field))
            if ref is not None:
                found.append(HubInput(f"{name}.{field}", ref))
    return found


def unavailable(inputs: list[HubInput]) -> list[str]:
    """One line for each input that is not here and that ``HF_HUB_OFFLINE`` forbids fetching."""
    return [f"{item.where}: {err}" for item in inputs if (err := item.refusal()) is not None]


def dry_run_lines(inputs: list[HubInput]) -> list[str]:
    """What a launch would do with each input: use what is here, or fetch it (or stop, offline)."""
    lines = []
    for item in inputs:
        local, refusal = item.local(), item.refusal()
        if local is not None:
            lines.append(f"{item.where} = {item.ref}: here, {local}")
        elif refusal is not None:
            lines.append(f"{item.where} = {item.ref}: not here, and HF_HUB_OFFLINE is set: a launch from this host "
                         "stops")
        else:
            lines.append(f"{item.where} = {item.ref}: not here; a launch fetches it into {item.store()}")
    return lines


def resolve(inputs: list[HubInput], say: Callable[[str], None] | None = None) -> dict[str, Path]:
    """``{where: local path}``: each input from this machine, or fetched into its store (``say`` gets a line before
    and after each fetch).  Raises :class:`HubError` naming the field for the first that cannot be had."""
    resolved = {}
    for item in inputs:
        local = item.local()
        refusal = item.refusal() if local is None else None
        if refusal is not None:
            raise HubError(f"{item.where}: {refusal}")
        if local is None and say is not None:
            say(f"{item.where} = {item.ref}: fetching into {item.store()}")
        try:
            resolved[item.where] = local or item.fetch()
        except HubError as err:
            raise HubError(f"{item.where}: {err}") from None
        if local is None and say is not None:
            say(f"{item.where} = {item.ref}: fetched, {resolved[item.where]}")
    return resolved


def pin(cfg, edits, inputs: list[HubInput], resolved: dict[str, Path]) -> None:
    """Set each input's field in ``cfg`` to its local path, recorded in ``edits`` as ``fetched <id>``."""
    for item in inputs:
        path = str(resolved[item.where])
        override = ov.Override(item.where, path, f"{item.where}={path}")
        edits.apply(f"fetched {item.ref}", lambda override=override: ov.apply_override(cfg, override))


def say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
