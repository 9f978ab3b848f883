"""What a scoring worker process runs: answer verification with math-verify in-process.

Inside a ``TimeoutPool`` worker the pool itself is the time limit (it kills the worker), so math-verify runs here
without the helper process that ``ppo.envs.math.verify`` needs, and without its signal-based timeouts.
"""

from __future__ import annotations

from ppo.envs.answer import extract_answer
from ppo.envs.latex import latex_equal, quiet_math_verify
from ppo.envs.latex_guard import limit_address_space
from ppo.envs.math import score_answer

WORKER_MEMORY_BYTES = 2 << 30
"""Address space a worker may add after its imports; SymPy blowing past it raises MemoryError and scores 0.0."""


def init_worker() -> None:
    """Import SymPy and math-verify before any item starts, so their import time is not charged to an item."""
    quiet_math_verify()
    import math_verify  # noqa: F401

    limit_address_space(WORKER_MEMORY_BYTES)


def score_item(response: object, ground_truth: object) -> tuple[float, bool]:
    """(reward, whether the response stated an answer at all); never raises."""
    try:
        return score_answer(response, ground_truth, latex_equal), extract_answer(response) is not None
    except Exception:
        return 0.0, False
