"""A free TCP port on this node (rendezvous stores, test servers); no Ray, no torch."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port free on every interface of this node: torch's TCPStore listens on all interfaces, so a port free on
    one address alone may still be taken."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]
