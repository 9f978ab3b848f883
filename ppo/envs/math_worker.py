"""What a scoring worker process runs: answer verification with math-verify in-process.

Inside a ``TimeoutPool`` worker the pool itself is the time limit (it kills the worker), so math-verify runs here
without its signal-based timeouts.  ``MathEnvironment``'s pool runs ``score_item``; ``ppo.envs.math.verify``'s pool
runs ``compare_answers``.
"""

from __future__ import annotations

import resource

from ppo.envs.answer import extract_answer
from ppo.envs.latex import latex_equal, quiet_math_verify
from ppo.envs.scoring import score_answer

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
    except Exception:  # noqa: BLE001 - never raises (docstring): anything unscorable scores 0.0
        return 0.0, False


def compare_answers(reference: str, candidate: str) -> bool:
    """math-verify's verdict on two bare answers (``latex_equal``); False if it raises."""
    try:
        return latex_equal(str(reference), str(candidate))
    except Exception:  # noqa: BLE001 - math-verify raises many types on odd input; all mean "not equal"
        return False


def limit_address_space(extra_bytes: int) -> None:
    """Cap this process's address space at its current size plus ``extra_bytes`` (Linux; a no-op elsewhere).

    Measured from the current size because SymPy and NumPy already map hundreds of MB after import, so a fixed cap
    would be either too tight to import or too loose to matter.
    """
    try:
        with open("/proc/self/status") as status:
            vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        limit = vm_kb * 1024 + extra_bytes
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or limit < soft:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError, StopIteration):
        pass
