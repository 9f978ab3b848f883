"""Starting Ray for a run on this machine, on loopback only.

Ray rewrites ``127.0.0.1``/``localhost`` to the machine's network address, so a local run binds to another
loopback address (127.0.0.2 by default).  Authentication is set explicitly: a plain ``ray.init()`` turns on token
auth and writes ``~/.ray/auth_token``, which later makes multi-node ``ray start`` joins fail.
"""

from __future__ import annotations

import os

LOCAL_NODE_IP = "127.0.0.2"


def init_local_ray(*, num_cpus: int | None = None, node_ip: str = LOCAL_NODE_IP, quiet: bool = True) -> None:
    """``ray.init`` a fresh single-node runtime bound to ``node_ip`` (no-op if Ray is already initialised here)."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        num_cpus=num_cpus or os.cpu_count(),
        _node_ip_address=node_ip,
        include_dashboard=False,
        log_to_driver=not quiet,
        configure_logging=False,
    )


def connect_or_start(address: str | None = None, **kwargs) -> None:
    """Join the Ray cluster at ``address`` (a SLURM job's head) or start a local one."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        init_local_ray(**kwargs)
