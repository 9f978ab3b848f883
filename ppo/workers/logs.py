"""Each worker's output in the run directory, where it outlives the worker, its node and Ray's temp dir.

Ray keeps actor output under the node's temp dir, which every node deletes at exit, and the driver does not echo it
(``log_to_driver=False``: the console shows the run's progress, not every worker's warnings).  So an actor points its
own stdout and stderr (the file descriptors, so that C++ code — NCCL, vLLM's engine core process — is captured too)
at ``<run dir>/logs/<role>-<rank>.log`` as it starts; a crash, an OOM message or a NCCL error stays with the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LOGS = "logs"


def worker_log(log_dir: str | Path | None, role: str, rank: int) -> str | None:
    return None if log_dir is None else str(Path(log_dir) / f"{role}-{rank}.log")


def redirect_output(path: str | None) -> None:
    """Append this process's stdout and stderr (file descriptors 1 and 2) to ``path`` (no-op for None)."""
    if path is None:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
