"""A process pool in which every item has its own wall-clock budget, and an overrunning item costs only itself.

``concurrent.futures`` cannot cancel a running call, and a future does not say when its call started, so a plain
``ProcessPoolExecutor`` with ``result(timeout=...)`` would either wait for a stuck SymPy call for ever or charge
queueing time to innocent items.  Here each worker announces the item it starts on a ``SimpleQueue`` (written
synchronously, so the announcement is out before any long computation holds the GIL); an item running longer than
its budget gets the default result, the pool's processes are killed, and the items that had not finished are
resubmitted to a fresh pool.

Items travel in a few chunks per worker (a future per item costs more than checking an integer answer: 512 answers
took 0.3-0.5 s one by one, 0.07 s in chunks).  A chunk runs its items one after the other, announcing each, so the
item a chunk announced last is the one it is running, and only that one is charged when time runs out or the worker
dies.  Worker start-up (spawning, importing SymPy) happens before any item is announced, so it never counts against
an item's budget; a separate, longer ``startup_timeout`` catches a pool that never starts anything.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

logger = logging.getLogger(__name__)

_POLL_SECONDS = 0.02
_CHUNKS_PER_WORKER = 4  # items travel in chunks (one future each): per-item futures cost ~0.5 ms apiece
_started: Any = None


def _init_worker(started: Any, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    global _started
    _started = started
    if hasattr(signal, "SIGUSR2"):  # SLURM's preemption warning goes to every process of the job; it is the driver's
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


def _run_chunk(fn: Callable[..., Any], items: list[tuple[int, tuple]]) -> list[tuple[bool, Any]]:
    """Run a chunk's items one after the other, announcing each before it starts; per item ``(True, result)``, or
    ``(False, traceback)`` for one that raised (the rest of the chunk still runs)."""
    results = []
    for index, args in items:
        _started.put(index)
        try:
            results.append((True, fn(*args)))
        except Exception:  # noqa: BLE001 - reported by the parent, the item gets the default
            results.append((False, traceback.format_exc()))
    return results


class TimeoutPool:
    """Runs ``fn(*args)`` for many argument tuples in worker processes, each call limited to ``timeout`` seconds.

    ``start_method`` is ``"spawn"`` or ``"forkserver"``: forking a trainer that holds CUDA contexts, Ray threads and
    open sockets is unsafe.  The pool is created on first use and re-created after every timeout or crash.
    """

    def __init__(
        self,
        num_workers: int,
        *,
        initializer: Callable[..., None] | None = None,
        initargs: tuple = (),
        start_method: str = "spawn",
        startup_timeout: float = 120.0,
        max_restarts: int = 3,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be 'spawn' or 'forkserver', got {start_method!r}")
        self.num_workers = num_workers
        self.initializer = initializer
        self.initargs = initargs
        self.startup_timeout = startup_timeout
        self.max_restarts = max_restarts
        self.recycles = 0
        self._context = multiprocessing.get_context(start_method)
        self._executor: ProcessPoolExecutor | None = None
        self._started_queue: Any = None

    def map(
        self, fn: Callable[..., Any], calls: Sequence[tuple], *, timeout: float, default: Any
    ) -> tuple[list[Any], list[bool]]:
        """``[fn(*args) for args in calls]`` in parallel; an item that overran or crashed its worker gets ``default``.

        Returns the results in input order and, per item, whether it was cut off.  ``fn`` must be importable by the
        workers (a module-level function) and should catch its own exceptions; one that escapes also gives
        ``default``.  Items that were merely in flight when another item overran are rerun.  A crash (segfault,
        out-of-memory kill) does not say which item caused it, so when several were running each is rerun alone,
        and only the one that crashes alone is cut off.
        """
        results: list[Any] = [default] * len(calls)
        cut_off = [False] * len(calls)
        remaining = list(range(len(calls)))
        suspects: list[int] = []
        fruitless = 0
        while remaining:
            batch = suspects[:1] or remaining
            finished, overdue, crashed = self._run_round(fn, calls, batch, results, timeout)
            culprits = overdue | (crashed if len(crashed) == 1 else set())
            suspects = [
                i for i in dict.fromkeys([*suspects, *sorted(crashed)]) if i not in finished and i not in culprits
            ]
            for index in culprits:
                cut_off[index] = True
            remaining = [i for i in remaining if i not in finished and i not in culprits]
            fruitless = 0 if finished or culprits or crashed else fruitless + 1
            if remaining and fruitless >= self.max_restarts:
                logger.error(
                    "worker pool made no progress in %d attempts; %d items get the default", fruitless, len(remaining)
                )
                for index in remaining:
                    cut_off[index] = True
                break
        return results, cut_off

    def _run_round(
        self, fn: Callable[..., Any], calls: Sequence[tuple], indices: list[int], results: list[Any], timeout: float
    ) -> tuple[set[int], set[int], set[int]]:
        """Run ``indices`` on the current pool until all finish, one overruns, or a worker dies; then recycle.

        Returns the finished items, the overdue ones, and the ones in flight when a worker died.  Every item that
        started has announced itself before the round ends (the announcement is written before ``fn`` runs), so
        "in flight" is exact.
        """
        chunks = _chunks(indices, self.num_workers * _CHUNKS_PER_WORKER)
        chunk_of = {i: c for c, chunk in enumerate(chunks) for i in chunk}

        def submit(executor) -> dict[Future, int]:
            return {executor.submit(_run_chunk, fn, [(i, calls[i]) for i in chunk]): c
                    for c, chunk in enumerate(chunks)}

        executor, started_queue = self._ensure_pool()
        try:
            futures = submit(executor)
        except BrokenProcessPool:  # a worker died while the pool was idle (killed, OOM): start a fresh pool
            logger.warning("a worker of the idle pool died; starting a fresh pool")
            self._recycle()
            executor, started_queue = self._ensure_pool()
            futures = submit(executor)
        pending = set(futures)
        latest: dict[int, tuple[int, float]] = {}  # chunk -> (the item it announced last: the one it is running, when)
        finished: set[int] = set()
        overdue: set[int] = set()
        crashed: set[int] = set()
        broken = False
        last_progress = time.monotonic()
        while pending:
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
            now = time.monotonic()
            while not started_queue.empty():
                index = started_queue.get()
                latest[chunk_of[index]] = (index, now)
                last_progress = now
            for future in done:
                chunk = chunks[futures[future]]
                try:
                    outcomes = future.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                for index, (ok, value) in zip(chunk, outcomes):
                    if ok:
                        results[index] = value
                    else:
                        logger.error("item %d raised in its worker:\n%s", index, value)
                    finished.add(index)
                last_progress = now
            running = {i: t for i, t in latest.values() if i not in finished}
            if broken:
                crashed = set(running)
                break
            overdue = {i for i, t in running.items() if now - t > timeout}
            if overdue:
                break
            if pending and not running and now - last_progress > self.startup_timeout:
                logger.error("worker pool started nothing in %.0f s; recycling it", self.startup_timeout)
                break
        if pending or broken:
            self._recycle()
        return finished, overdue, crashed

    def _ensure_pool(self) -> tuple[ProcessPoolExecutor, Any]:
        if self._executor is None:
            self._started_queue = self._context.SimpleQueue()
            self._executor = ProcessPoolExecutor(
                max_workers=self.num_workers,
                mp_context=self._context,
                initializer=_init_worker,
                initargs=(self._started_queue, self.initializer, self.initargs),
            )
        return self._executor, self._started_queue

    def _recycle(self) -> None:
        """Kill every worker (the only way to stop a running call) and drop the pool; the next round makes a new one."""
        self.recycles += 1
        self._shutdown()

    def _shutdown(self) -> None:
        executor, self._executor = self._executor, None
        queue, self._started_queue = self._started_queue, None
        if executor is None:
            return
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for process in processes:
            try:
                process.kill()
            except (OSError, ValueError, AttributeError):
                pass
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            try:
                process.join(timeout=10)
            except (OSError, ValueError, AssertionError):
                pass
        if queue is not None:
            queue.close()

    def close(self) -> None:
        """Stop the workers; killing them is safe (they hold no state) and cannot hang on a stuck call."""
        self._shutdown()

    def __enter__(self) -> TimeoutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(indices: list[int], count: int) -> list[list[int]]:
    """``indices`` in at most ``count`` contiguous chunks of near-equal size."""
    size = -(-len(indices) // max(1, count))
    return [indices[k : k + size] for k in range(0, len(indices), size)]
