"""Math answer verification: the reward of a math environment, ``verify(response, ground_truth) -> 1.0 | 0.0``.

Plain-number references (GSM8K, AIME, most of DAPO-Math) are decided here by exact rational comparison of the
extracted answer, which is fast and needs no SymPy.  Anything else (``\\frac{\\pi}{2}``, ``(0, 1]``, ``2\\sqrt{3}``)
goes to math-verify, run under a hard time limit in a worker process (the ``TimeoutPool`` of ``ppo.envs.pool``, the
same mechanism the training path's ``MathEnvironment`` uses) so that a pathological answer costs at most
``timeout`` seconds and scores 0.0.  ``verify`` never raises and never hangs.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any

from ppo.envs.answer import extract_answer, normalize_answer
from ppo.envs.scoring import reference_answer, score_answer

__all__ = ["extract_answer", "normalize_answer", "reference_answer", "score_answer", "verify", "VERIFY_TIMEOUT"]

logger = logging.getLogger(__name__)

VERIFY_TIMEOUT = 5.0
"""Seconds math-verify may spend on one comparison before the response scores 0.0."""
STARTUP_TIMEOUT = 60.0
"""Seconds ``verify``'s worker may take to start (spawn, import math-verify and SymPy); not charged to a comparison."""


def verify(response: object, ground_truth: object, *, timeout: float = VERIFY_TIMEOUT) -> float:
    """1.0 when the response's final answer (see ``extract_answer``) equals the reference answer, else 0.0.

    ``ground_truth`` is a bare answer (``"18"``, ``"1,200"``, ``"\\frac{1}{2}"``) or a text holding one after a
    ``####`` or in a ``\\boxed{}``.  Safe from any thread; any failure scores 0.0.  A symbolic comparison needs a
    worker process, which a daemonic process (a ``multiprocessing.Pool`` worker) may not start: there such answers
    score 0.0 (with a warning), while plain numbers are still decided exactly.
    """

    def symbolic(reference: str, candidate: str) -> bool | None:
        return _SYMBOLIC.equal(reference, candidate, timeout)

    try:
        return score_answer(response, ground_truth, symbolic)
    except Exception:  # noqa: BLE001 - a reward function never raises: anything unscorable scores 0.0
        return 0.0


class SymbolicPool:
    """``verify``'s math-verify comparisons: a one-worker ``TimeoutPool``, made on first use, shared by the threads of
    this process (served one at a time).

    ``equal`` answers True/False, or None when the comparison overran ``timeout`` or killed its worker (a crash in
    SymPy, the worker's memory limit); the pool replaces the worker either way.  After ``fork`` the child makes its
    own pool: the parent's belongs to the parent and is neither used nor closed there.
    """

    def __init__(self, initializer: Callable[[], None] | None = None, startup_timeout: float = STARTUP_TIMEOUT):
        self.initializer = initializer
        self.startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._pool: Any = None
        self._owner_pid = os.getpid()
        self._inherited: list[Any] = []
        self._warned_daemonic = False

    def equal(self, reference: str, candidate: str, timeout: float) -> bool | None:
        if multiprocessing.current_process().daemon:
            if not self._warned_daemonic:
                self._warned_daemonic = True
                logger.warning("verify runs in a daemonic process, which may not start the worker that bounds "
                               "math-verify's time: answers that are not plain numbers score 0.0 here")
            return None
        from ppo.envs.math_worker import compare_answers

        with self._lock:
            (result,), _ = self._ensure_pool().map(compare_answers, [(reference, candidate)], timeout=timeout,
                                                   default=None)
        return result

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is not None and self._owner_pid == os.getpid():
                pool.close()

    def _ensure_pool(self) -> Any:
        if self._owner_pid != os.getpid():
            self._forget_inherited()
        if self._pool is None:
            from multiprocessing.util import Finalize

            from ppo.envs.math_worker import init_worker
            from ppo.envs.pool import TimeoutPool

            self._pool = TimeoutPool(1, initializer=self.initializer or init_worker,
                                     startup_timeout=self.startup_timeout)
            # A multiprocessing child joins its (non-daemonic) child processes when its target returns, before the
            # pool's own exit hook would stop the worker: close the pool first, or that join waits for ever.
            Finalize(self._pool, self._pool.close, exitpriority=1)
        return self._pool

    def _forget_inherited(self) -> None:
        """Keep the parent's pool object alive but unused: closing it here would kill the parent's worker."""
        if self._pool is not None:
            self._inherited.append(self._pool)
        self._pool, self._owner_pid = None, os.getpid()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # another thread of the parent may have held it at the fork
        self._forget_inherited()


_SYMBOLIC = SymbolicPool()
atexit.register(_SYMBOLIC.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SYMBOLIC._after_fork_in_child)
