"""Models named by their Hugging Face hub id, resolved to a snapshot folder of the local HF cache.

Where a local checkpoint folder is expected (``model.path``, ``critic.model_path``), a hub id may stand instead:
``Qwen/Qwen2.5-1.5B`` (the default branch) or ``Qwen/Qwen2.5-1.5B@<revision>`` (a branch, tag or commit; see
:mod:`ppo.hub` for the spelling and what counts as local).  :func:`cached_model` looks it up in the cache without the
network; :func:`fetch_model` downloads it there with ``huggingface_hub.snapshot_download``.  Either gives the snapshot
folder, ``<cache>/models--Qwen--Qwen2.5-1.5B/snapshots/<commit>``: an ordinary checkpoint folder (its files are
links into the cache's ``blobs/``) that transformers, vLLM and the Megatron converter read like any other.

Only what a run reads is fetched (:data:`MODEL_FILES`: configs, safetensors weights, tokenizer files), not a
repository's other weight formats.  A snapshot counts as there when its ``config.json`` and every weight file are
(:func:`missing_files`), so an interrupted download is fetched again rather than passed on to a job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ppo.hub import (
    REPO_ID,
    REVISION,
    HubError,
    cached_snapshot_folder,
    describe_failure,
    hub_cache,
    matches,
    offline,
)

MODEL_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
"""What a run reads of a model repository: config and tokenizer JSON, safetensors weights (and their index),
``merges.txt``/``vocab.txt``, sentencepiece and tiktoken vocabularies, chat templates."""


@dataclass(frozen=True)
class HubModel:
    """``org/name`` at ``revision`` (None: the repository's default branch)."""

    repo_id: str
    revision: str | None = None

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def parse_model_id(text: str) -> HubModel | None:
    """The hub model ``text`` names (``org/name`` or ``org/name@revision``), or None for a local path."""
    match = matches(rf"(?P<repo>{REPO_ID})(?:@(?P<revision>{REVISION}))?", text)
    return HubModel(match["repo"], match["revision"]) if match else None


def missing_files(folder: Path) -> list[str]:
    """The files a checkpoint folder lacks: ``config.json``, and the weights (``model.safetensors``, or every shard
    its ``model.safetensors.index.json`` names)."""
    missing = [] if (folder / "config.json").is_file() else ["config.json"]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError):
            return [*missing, index.name]
        return missing + [shard for shard in shards if not (folder / shard).is_file()]
    return missing + ([] if (folder / "model.safetensors").is_file() else ["model.safetensors"])


def snapshot_folder(model: HubModel) -> Path | None:
    """The cache's snapshot folder of ``model``'s revision, or None (:func:`ppo.hub.cached_snapshot_folder`)."""
    return cached_snapshot_folder(model.repo_id, model.revision, "model")


def cached_model(model: HubModel) -> Path | None:
    """The complete snapshot folder of ``model`` in the cache, or None; never uses the network."""
    folder = snapshot_folder(model)
    return None if folder is None or missing_files(folder) else folder


def offline_refusal(model: HubModel) -> HubError:
    """The error for a model that is not in the cache when ``HF_HUB_OFFLINE`` forbids fetching it."""
    return HubError(f"{model} is not in the HF cache ({hub_cache()}) and HF_HUB_OFFLINE is set: fetch it where the "
                    "hub can be reached (python launch.py prepare FILE), or give a local folder")


def fetch_model(model: HubModel) -> Path:
    """The snapshot folder of ``model``, downloaded into the cache unless it is there; raises :class:`HubError`
    (one line) when it is not there and cannot be fetched."""
    folder = cached_model(model)
    if folder is not None:
        return folder
    if offline():
        raise offline_refusal(model)
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(model.repo_id, revision=model.revision, cache_dir=hub_cache(),
                                        allow_patterns=MODEL_FILES))
    except (OSError, ValueError) as err:  # huggingface_hub's errors are OSErrors; a malformed id a ValueError
        raise HubError(f"{model} cannot be fetched from the hub into {hub_cache()} ({describe_failure(err)})") from None
    missing = missing_files(folder)
    if missing:
        raise HubError(f"{model} at {folder} has no {', '.join(missing)} (a model needs config.json and safetensors "
                       "weights)")
    return folder
