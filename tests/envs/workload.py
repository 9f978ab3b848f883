"""Module-level functions for ``TimeoutPool`` tests: spawned workers import them by name."""

from __future__ import annotations

import os
import time


def slow_identity(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value


def crash_or_identity(value: int, crash: bool) -> int:
    if crash:
        os._exit(3)
    return value


def sleep_or_crash(value: int, crash: bool, seconds: float) -> int:
    """Crashes at once, or sleeps and returns: lets a test crash a worker while a sibling item is in flight."""
    if crash:
        os._exit(3)
    time.sleep(seconds)
    return value


def raise_or_identity(value: int, fail: bool) -> int:
    if fail:
        raise ValueError(f"item {value} fails")
    return value
