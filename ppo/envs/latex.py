"""Symbolic answer comparison with math-verify, in-process and without any time limit.

math-verify (HuggingFace's grader for MATH, DAPO-Math and AIME style answers) decides ``\\frac{1}{2}`` = ``0.5``,
``2\\sqrt{3}`` = ``\\sqrt{12}``, interval and set equality, and so on, through SymPy.  SymPy can run for ever on
inputs such as ``10^{10^{10}}``, and math-verify's own guard (``signal.alarm``) only works in a main thread and
cannot interrupt C-level big-integer arithmetic.  So its timeouts are switched off here and the callers bound the
time from outside, by killing the process this runs in: the worker pools (``ppo.envs.pool.TimeoutPool``) of
``ppo.envs.math.verify`` and ``ppo.envs.math_env``.  Never call this directly from a process that must stay
responsive.
"""

from __future__ import annotations

import logging


def latex_equal(reference: str, candidate: str) -> bool:
    """True when math-verify judges the candidate answer equal to the reference (both bare answers, no prose).

    Each side is wrapped in ``$...$`` so math-verify's LaTeX extraction takes the whole answer as one expression;
    the reference goes first because math-verify's comparison is not symmetric (it treats the first argument as gold).
    """
    from math_verify import parse, verify

    reference_parsed = parse(f"${reference}$", parsing_timeout=None)
    candidate_parsed = parse(f"${candidate}$", parsing_timeout=None)
    if not reference_parsed or not candidate_parsed:
        return False
    return bool(verify(reference_parsed, candidate_parsed, timeout_seconds=None))


def quiet_math_verify() -> None:
    """Silence math-verify's per-call warnings ("Timeout is disabled", parse failures): they would flood the logs."""
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
