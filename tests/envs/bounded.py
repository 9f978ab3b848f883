"""Runs a call under a wall-clock bound so that a hang fails a test instead of stalling the suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

HANG_LIMIT = 10.0
"""Generous bound for one call on hostile input: a hang fails the test instead of stalling the suite."""


def call_bounded(fn: Callable[..., Any], *args: Any, limit: float = HANG_LIMIT, **kwargs: Any) -> Any:
    """``fn(*args)`` in a daemon thread; fails the test if it has not returned within ``limit`` seconds.

    Running off the main thread is deliberate: math-verify's signal-based timeout cannot work there, so these tests
    also prove that ``verify`` does not rely on it.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} did not return within {limit} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
