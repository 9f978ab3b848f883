"""Atomic file writes: a reader sees the old file or the new one, never half of one.

The text goes to a fresh temporary file in the target's directory (``.<name>.<random>.tmp``; readers that skip
dot-files never see it), which ``os.replace`` then renames over the target: atomic on POSIX within one filesystem.
The temporary file is removed if anything fails.  Used for every file the launcher, the jobs, the sweeps and the
nightly history rewrite while others may read them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike[str], text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; its directory must exist.

    ``mode`` is the file's permission bits; by default what ``open()`` would give under the current umask.  The
    temporary file is owner-only from the start, so ``mode=0o600`` keeps a secret unreadable to others throughout.
    """
    _write_atomic(path, text, mode=mode, binary=False)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> None:
    """:func:`write_text_atomic` for bytes (e.g. a safetensors file)."""
    _write_atomic(path, data, mode=mode, binary=True)


def _write_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int | None, binary: bool) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.chmod(tmp, file_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, mode: int | None = None, **dumps: Any) -> None:
    """``json.dumps(obj, **dumps)`` and a newline, written with :func:`write_text_atomic`."""
    write_text_atomic(path, json.dumps(obj, **dumps) + "\n", mode=mode)


def file_mode() -> int:
    """What ``open()`` would give a new file under the current umask (``mkstemp`` files are owner-only)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
