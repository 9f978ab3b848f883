"""Polling helpers for tests that wait on real processes (SLURM jobs, training runs, sweeps)."""

from __future__ import annotations

import time


def wait_for(condition, timeout: float, what: str, poll_s: float = 0.5):
    """Poll ``condition()`` until it returns something truthy (returned) or ``timeout`` passes (TimeoutError)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        result = condition()
        if result:
            return result
        time.sleep(poll_s)
    raise TimeoutError(f"timed out waiting for {what}")
