"""Datasets named by their Hugging Face hub id, fetched once into ``PPO_DATA_ROOT`` as one parquet file per split.

Where a data file is expected (``task.train_path``, ``task.test_path``, ``task.val_path``), a hub dataset may stand
instead, with its split and, for a dataset of several configs, the config::

    BytedTsinghua-SIA/DAPO-Math-17k:train          ORG/NAME:SPLIT
    openai/gsm8k:main:test                         ORG/NAME:CONFIG:SPLIT
    openai/gsm8k@<revision>:main:test              at a branch, tag or commit

(:mod:`ppo.hub` says what counts as a local path instead.)  :func:`fetch_dataset` downloads the repository into the
HF cache (``huggingface_hub.snapshot_download``, offline from what the cache holds), reads the split through the
``datasets`` library (any layout it understands: parquet, json, csv, sharded or not, configs from the README) and
writes it to :func:`dataset_file`::

    $PPO_DATA_ROOT/<org>/<name>[@<revision>]/<config or "default">/<split>.parquet   (and <split>.SOURCE.json)

The loaders (:func:`ppo.data.load_gsm8k` and the others) read that file for a hub id (:func:`local_dataset_file`), so
a run reads one plain parquet file on a filesystem its nodes see, and never imports ``datasets`` nor contacts the hub.

``PPO_DATA_ROOT`` defaults to ``$XDG_CACHE_HOME/ppo/data`` (``~/.cache/ppo/data``): beside the HF cache, outside any
checkout (a data folder in the tree would make it dirty and be copied per clone), and in the home directory, which
clusters usually share with their compute nodes.  Set it to the cluster's shared data filesystem otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ppo.data.records import DatasetError
from ppo.hub import REPO_ID, REVISION, HubError, cached_snapshot_folder, describe_failure, hub_cache, matches, offline

DATA_ROOT_ENV = "PPO_DATA_ROOT"
SPLIT = r"[A-Za-z0-9][\w.-]*"
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
"""Data files the loaders read (:func:`ppo.data.records.read_rows`): never hub ids, whatever their spelling."""


@dataclass(frozen=True)
class HubDataset:
    """The ``split`` of ``repo_id``'s ``config`` (None: its only or default one) at ``revision`` (None: default)."""

    repo_id: str
    split: str
    config: str | None = None
    revision: str | None = None

    def __str__(self) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        config = f":{self.config}" if self.config else ""
        return f"{self.repo_id}{revision}{config}:{self.split}"


def parse_dataset_id(text: str) -> HubDataset | None:
    """The hub dataset ``text`` names (``ORG/NAME[@REVISION][:CONFIG]:SPLIT``), or None for a local path."""
    if not isinstance(text, str) or text.lower().endswith(LOCAL_SUFFIXES):
        return None
    match = matches(rf"(?P<repo>{REPO_ID})(?:@(?P<revision>{REVISION}))?(?::(?P<config>{SPLIT}))?:(?P<split>{SPLIT})",
                    text)
    return HubDataset(match["repo"], match["split"], match["config"], match["revision"]) if match else None


def data_root() -> Path:
    """``PPO_DATA_ROOT``, read now; default ``$XDG_CACHE_HOME/ppo/data`` or ``~/.cache/ppo/data``."""
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "ppo" / "data"


def dataset_file(dataset: HubDataset) -> Path:
    """Where ``dataset``'s split lives once fetched (it may not be there)."""
    folder = dataset.repo_id + (f"@{dataset.revision.replace('/', '--')}" if dataset.revision else "")
    return data_root() / folder / (dataset.config or "default") / f"{dataset.split}.parquet"


def local_dataset_file(path: str | Path) -> Path:
    """The file a loader reads for ``path``: the fetched parquet file of a hub id (a :class:`DatasetError` when it is
    not there yet), else ``path`` itself."""
    dataset = parse_dataset_id(str(path))
    if dataset is None:
        return Path(path)
    file = dataset_file(dataset)
    if not file.is_file():
        raise DatasetError(f"{dataset} is not in PPO_DATA_ROOT ({data_root()}): fetch it first (python launch.py "
                           "prepare FILE, or any launch)")
    return file


def fetch_dataset(dataset: HubDataset) -> Path:
    """:func:`dataset_file` of ``dataset``, written unless it is there; raises :class:`HubError` (one line) when the
    repository cannot be fetched or has no such config or split."""
    file = dataset_file(dataset)
    if file.is_file():
        return file
    if offline():
        snapshot = cached_snapshot(dataset)
        if snapshot is None:
            raise offline_refusal(dataset)
    else:
        from huggingface_hub import snapshot_download

        try:
            snapshot = Path(snapshot_download(dataset.repo_id, repo_type="dataset", revision=dataset.revision,
                                              cache_dir=hub_cache()))
        except (OSError, ValueError) as err:  # huggingface_hub's errors are OSErrors; a malformed id a ValueError
            raise HubError(f"dataset {dataset.repo_id} cannot be fetched from the hub into {hub_cache()} "
                           f"({describe_failure(err)})") from None
    _write_split(dataset, snapshot, file)
    return file


def cached_snapshot(dataset: HubDataset) -> Path | None:
    """The snapshot folder of ``dataset``'s repository in the HF cache, or None; never uses the network (nor
    imports huggingface_hub: :func:`ppo.hub.cached_snapshot_folder`)."""
    return cached_snapshot_folder(dataset.repo_id, dataset.revision, "dataset")


def offline_refusal(dataset: HubDataset) -> HubError:
    """The error for a dataset that is neither in PPO_DATA_ROOT nor in the HF cache when ``HF_HUB_OFFLINE`` forbids
    fetching it."""
    return HubError(f"dataset {dataset} is neither in PPO_DATA_ROOT ({data_root()}) nor in the HF cache "
                    f"({hub_cache()}) and HF_HUB_OFFLINE is set: fetch it where the hub can be reached (python "
                    "launch.py prepare FILE), or give a local file")


def _write_split(dataset: HubDataset, snapshot: Path, file: Path) -> None:
    """Read the split from the snapshot folder with ``datasets`` and write it to ``file`` (atomically), after
    ``<split>.SOURCE.json``, which says which repository, revision and commit it came from."""
    import datasets

    file.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".fetch-", dir=file.parent))  # the arrow cache, removed afterwards
    try:
        try:
            split = datasets.load_dataset(str(snapshot), dataset.config, split=dataset.split, cache_dir=str(scratch))
        except (ValueError, OSError) as err:  # an unknown config or split, no data files
            raise HubError(f"dataset {dataset}: {describe_failure(err)}") from None
        partial = scratch / file.name
        split.to_parquet(str(partial))
        source = {"repo_id": dataset.repo_id, "revision": dataset.revision, "commit": snapshot.name,
                  "config": dataset.config, "split": dataset.split, "rows": split.num_rows}
        (file.parent / f"{dataset.split}.SOURCE.json").write_text(json.dumps(source, indent=2) + "\n")
        os.replace(partial, file)  # last: the parquet file being there means the fetch finished
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
