"""Waiting on workers with a deadline: a hung worker fails the step with its name, instead of stalling the run.

A crashed actor already surfaces as an exception from ``ray.get``; a hung one (a deadlocked collective, a stopped
process, a GPU stuck in a kernel) would block the driver until the job's time limit, and on SLURM that limit's
signal looks like a preemption that requeues the job into the same hang.  With a deadline the run fails instead.
"""

from __future__ import annotations

import ray


class WorkerTimeout(TimeoutError):
    pass


def get_within(refs: list, timeout_s: float | None, names: list[str], what: str) -> list:
    """``ray.get(refs)``, but raise :class:`WorkerTimeout` naming the workers (``names[i]`` for ``refs[i]``) that had
    not answered ``what`` after ``timeout_s`` seconds (``None``: wait forever)."""
    if timeout_s is not None:
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        if pending:
            late = [name for ref, name in zip(refs, names) if ref in pending]
            raise WorkerTimeout(f"{', '.join(late)} did not finish {what} within {timeout_s:g} s (hung?)")
    return ray.get(refs)
