"""One response scored against its reference, with the symbolic comparison supplied by the caller.

Both places that score answers build on this: ``ppo.envs.math.verify`` (which bounds math-verify's time in a worker
pool of its own) and the scoring worker processes of ``ppo.envs.math_worker`` (where the pool that runs them is the
time limit).  It lives apart from both so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Rational

from ppo.envs.answer import as_text, extract_answer, normalize_answer, numbers_equal, parse_number

MAX_SYMBOLIC_CHARS = 1000
"""Longer answers are not handed to math-verify at all: no reference answer is that long, and SymPy's cost grows
with length far faster than linearly."""

LatexEqual = Callable[[str, str], "bool | None"]


def score_answer(response: object, ground_truth: object, latex_equal: LatexEqual) -> float:
    """``verify`` with the symbolic comparison supplied by the caller (who is responsible for bounding its time).

    The environment's worker processes pass math-verify itself, unguarded, because the pool that runs them kills
    a worker that overruns; ``verify`` passes a comparison that runs in such a pool.
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
