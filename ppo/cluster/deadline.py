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


class Pending:
    """Calls started on workers (:meth:`ppo.workers.group.WorkerGroup.call_async`,
    :meth:`ppo.rollout.generation.EnginePool.call_async`): :meth:`wait` gives every answer in order within the
    deadline, or raises :class:`WorkerTimeout` naming the workers that did not answer."""

    def __init__(self, refs: list, names: list[str], what: str, timeout_s: float | None):
        """``names[i]``: who answers ``refs[i]``; ``what``: the call, as a timeout names it (e.g. ``'values'``)."""
        self.refs, self.names, self.what, self.timeout_s = refs, names, what, timeout_s

    def wait(self) -> list:
        return get_within(self.refs, self.timeout_s, self.names, self.what)

    def first(self):
        """The first worker's answer (rank 0's: the whole model's, for calls whose collectives end on every rank)."""
        return self.wait()[0]

    @classmethod
    def join(cls, parts: list[Pending], what: str) -> Pending:
        """Several calls waited on as one, under the longest of their deadlines: a refit's bucket."""
        limits = [p.timeout_s for p in parts]
        return cls([r for p in parts for r in p.refs], [n for p in parts for n in p.names], what,
                   None if None in limits else max(limits))
