"""Math answer verification: the reward of a math environment, ``verify(response, ground_truth) -> 1.0 | 0.0``.

Plain-number references (GSM8K, AIME, most of DAPO-Math) are decided here by exact rational comparison of the
extracted answer, which is fast and needs no SymPy.  Anything else (``\\frac{\\pi}{2}``, ``(0, 1]``, ``2\\sqrt{3}``)
goes to math-verify, run under a hard time limit in a helper process (``ppo.envs.latex_guard``) so that a
pathological answer costs at most ``timeout`` seconds and scores 0.0.  ``verify`` never raises and never hangs.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Rational

from ppo.envs.answer import as_text, extract_answer, normalize_answer, numbers_equal, parse_number

__all__ = ["extract_answer", "normalize_answer", "reference_answer", "score_answer", "verify", "VERIFY_TIMEOUT"]

VERIFY_TIMEOUT = 5.0
"""Seconds math-verify may spend on one comparison before the response scores 0.0."""
MAX_SYMBOLIC_CHARS = 1000
"""Longer answers are not handed to math-verify at all: no reference answer is that long, and SymPy's cost grows
with length far faster than linearly."""

LatexEqual = Callable[[str, str], "bool | None"]


def verify(response: object, ground_truth: object, *, timeout: float = VERIFY_TIMEOUT) -> float:
    """1.0 when the response's final answer (see ``extract_answer``) equals the reference answer, else 0.0.

    ``ground_truth`` is a bare answer (``"18"``, ``"1,200"``, ``"\\frac{1}{2}"``) or a text holding one after a
    ``####`` or in a ``\\boxed{}``.  Safe from any thread or process; any failure scores 0.0.
    """
    from ppo.envs.latex_guard import guarded_latex_equal

    def symbolic(reference: str, candidate: str) -> bool | None:
        return guarded_latex_equal(reference, candidate, timeout)

    try:
        return score_answer(response, ground_truth, symbolic)
    except Exception:
        return 0.0


def score_answer(response: object, ground_truth: object, latex_equal: LatexEqual) -> float:
    """``verify`` with the symbolic comparison supplied by the caller (who is responsible for bounding its time).

    The environment's worker processes pass math-verify itself, unguarded, because the pool that runs them kills
    a worker that overruns; ``verify`` passes the helper-process guard.
    """
    reference = reference_answer(ground_truth)
    candidate = extract_answer(response)
    if not reference or not candidate:
        return 0.0
    reference_value, candidate_value = parse_number(reference), parse_number(candidate)
    if reference_value is not None and candidate_value is not None:
        return 1.0 if numbers_equal(reference_value, candidate_value) else 0.0
    if candidate == reference:
        return 1.0
    if len(reference) > MAX_SYMBOLIC_CHARS or len(candidate) > MAX_SYMBOLIC_CHARS:
        return 0.0
    return 1.0 if latex_equal(reference, candidate) is True else 0.0


def reference_answer(ground_truth: object) -> str | None:
    """The normalised reference answer: a bare answer as given, or the marked answer of a full reference solution.

    Datasets hand references over as ``"18"``, ``18``, ``"\\frac{1}{2}"`` or a whole GSM8K solution ending in
    ``#### 18``; all of these reduce to the same normalised string.
    """
    if isinstance(ground_truth, (int, float, Rational)) and not isinstance(ground_truth, bool):
        ground_truth = str(ground_truth)
    text = as_text(ground_truth)
    if text is None:
        return None
    if "####" in text or "\\boxed" in text or "\\fbox" in text:
        return extract_answer(text)
    return normalize_answer(text) or None
