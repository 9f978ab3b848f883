"""A graceful stop when SLURM preempts a job or its time limit nears: checkpoint at a step boundary, then requeue.

SLURM sends SIGUSR2 ``executor.signal_delay_s`` seconds before it kills the job.  On node 0 the job body runs in a
``driver`` thread (``run_stoppable``) so that the main thread stays free for signal handlers.  submitit's handler calls
``SlurmJob.checkpoint``, which calls ``request_stop``: if a trainer has said it honours stops (``stoppable``), the
handler sets ``STOP`` and waits for the driver to finish its current step, write a checkpoint and end; then submitit
requeues the job, and the requeued attempt resumes from that checkpoint with nothing lost.  A body that never said
it honours stops (or one that does not finish within the grace period) is simply requeued, and resumes from its
latest periodic checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

STOP = threading.Event()
"""Set when the job must stop: the job body passes ``STOP.is_set`` to ``run(run_dir, should_stop=...)``; the trainer
checkpoints at the end of its current step and returns ``"stopped"``, and the job body raises ``Preempted``."""

_stoppable = threading.Event()
_driver: list[threading.Thread] = []


class Preempted(Exception):
    """The run stopped at a step boundary because the job is being preempted; its checkpoint is complete."""


def stoppable() -> None:
    """Called by the job body (:func:`ppo.launch.job.run_job`) when its experiment's ``run`` honours stops."""
    _stoppable.set()


def run_stoppable(body: Callable[[], None]) -> None:
    """Run ``body`` in a driver thread and wait for it here (the main thread keeps handling signals)."""
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            body()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            box["error"] = err

    thread = threading.Thread(target=target, name="ppo-driver", daemon=True)
    _driver[:] = [thread]
    thread.start()
    while thread.is_alive():
        thread.join(0.5)
    if "error" in box:
        raise box["error"]


def request_stop(grace_s: float) -> bool:
    """Ask the driver to stop at its next step boundary and wait up to ``grace_s``; True if it stopped in time."""
    if not _driver or not _driver[0].is_alive() or not _stoppable.is_set():
        return False
    print(f"[ppo] preemption signal: stopping at the end of the current step (grace {grace_s:.0f} s)", flush=True)
    STOP.set()
    _driver[0].join(grace_s)
    return not _driver[0].is_alive()
