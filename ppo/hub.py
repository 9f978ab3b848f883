"""What hub models (:mod:`ppo.models.hub`) and hub datasets (:mod:`ppo.data.hub`) share: the repository id syntax,
huggingface_hub's cache folder, offline mode, and the one-line error.

A hub reference names a repository ``org/name``, optionally at a revision: ``org/name@revision`` (a branch, tag or
commit hash).  A string is a hub reference only where it cannot be a local path: it does not start with ``/``, ``.``
or ``~``, nothing of that name exists here, and it has exactly one ``/`` (write a relative folder as ``./org/name``).

Environment variables are read when asked, not when a module is imported (huggingface_hub reads its own at import),
so a process — or a test — can point the cache elsewhere before fetching:

- ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
  ``~/.cache/huggingface/hub``: the cache, huggingface_hub's own rule;
- ``HF_HUB_OFFLINE=1`` (or ``true``/``yes``/``on``): nothing is fetched, only what the cache holds resolves.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ID = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"
"""``org/name`` as the hub spells repository ids (letters, digits, ``-``, ``_``, ``.``)."""
REVISION = r"[\w.-]+(?:/[\w.-]+)*"
"""A branch, tag or commit (``main``, ``v1.0``, ``refs/pr/3``, a 40-digit hash)."""


class HubError(ValueError):
    """A hub model or dataset that cannot be resolved or fetched; the message is one line naming it and the fix."""


def could_be_local(text: str) -> bool:
    """Whether ``text`` is spelled as a local path or names something that exists here (then it is not a hub id)."""
    return text.startswith(("/", ".", "~")) or Path(text).exists()


def hub_cache() -> Path:
    """huggingface_hub's cache folder, from the environment now (the rule in the module docstring)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return xdg / "huggingface" / "hub"


def cached_snapshot_folder(repo_id: str, revision: str | None, repo_type: str) -> Path | None:
    """The cache's snapshot folder of ``repo_id`` (a ``model`` or ``dataset``) at ``revision`` (None: ``main``), or
    None, read from huggingface_hub's cache layout (its ``try_to_load_from_cache`` and ``local_files_only`` reads
    the same): ``<cache>/<type>s--org--name/refs/<branch or tag>`` holds a commit hash, ``snapshots/<commit>/``
    that commit's files; a revision that no ref names is a commit itself.

    No huggingface_hub import: the dry run looks its models and datasets up here, and that package (with its HTTP
    client) costs ~0.2 s to import on a laptop CPU, for a lookup of a few ``stat`` calls."""
    repo = hub_cache() / f"{repo_type}s--{repo_id.replace('/', '--')}"
    revision = revision or "main"
    ref = repo / "refs" / revision
    if ref.is_file():
        revision = ref.read_text().strip()
    snapshots = repo / "snapshots"
    if not snapshots.is_dir() or revision not in os.listdir(snapshots):  # a listing: never ``..`` or a sub-path
        return None
    return snapshots / revision


def offline() -> bool:
    """``HF_HUB_OFFLINE`` set to a true value: resolve from the cache only."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def matches(pattern: str, text: str) -> re.Match | None:
    """``re.fullmatch`` of a hub reference pattern on a string that is not a local path."""
    if not isinstance(text, str) or could_be_local(text):
        return None
    return re.fullmatch(pattern, text)


def describe_failure(err: Exception) -> str:
    """huggingface_hub's and datasets' exceptions as a short clause: the class name and the first line, which is
    the one that says what was wrong (later lines are request ids and URLs)."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
