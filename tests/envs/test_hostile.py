"""``extract_answer`` and ``verify`` on hostile input: each returns promptly, never raises, and scores 0.0 or 1.0.

A policy under RL pressure produces exactly these: runaway repetition up to the length limit, unclosed braces,
binary garbage from a broken detokeniser, and LaTeX that sends SymPy into an endless computation.  Every call is
bounded (``call_bounded``) and runs off the main thread, where math-verify's signal-based timeout cannot help.
"""

from __future__ import annotations

import multiprocessing
import os
import random

import pytest

from ppo.envs.latex_guard import LatexGuard
from ppo.envs.math import extract_answer, verify

from .bounded import call_bounded

MB10 = 10_000_000


def _random_text(n: int) -> str:
    """Marker fragments and maths symbols in random order (built from 64 KiB blocks; ``random.choices`` is slow)."""
    rng = random.Random(0)
    pieces = ["answer", " is ", ":", "\\boxed{", "####", "<answer>", "</answer>", "{", "}", "$", "\\frac", "1,000", "7"]
    pieces += [".", " ", "\n"]
    block = "".join(rng.choices(pieces, k=16_384))
    return (block * (n // len(block) + 1))[:n]


HOSTILE = {
    "10 MB of one letter": lambda: "a" * MB10,
    "10 MB of digits": lambda: "9" * MB10,
    "10 MB of thousands groups": lambda: "1,000," * (MB10 // 6),
    "10 MB of random marker soup": lambda: _random_text(MB10),
    "unclosed boxed x 1.4M": lambda: "\\boxed{" * (MB10 // 7),
    "10 MB of open braces": lambda: "{" * MB10,
    "10 MB of backslashes": lambda: "\\" * MB10,
    "10 MB of dollars": lambda: "$" * MB10,
    "10 MB of hashes": lambda: "#" * MB10,
    "answer x 1.4M": lambda: "answer " * (MB10 // 7),
    "the answer is + 10 MB of spaces": lambda: "The answer is" + " " * MB10,
    "unclosed answer tags": lambda: "<answer>" * (MB10 // 8),
    "braces nested 10k deep": lambda: "\\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}",
    "fractions nested 10k deep": lambda: "\\boxed{" + "\\frac{1}{" * 10_000 + "2" + "}" * 10_000 + "}",
    "unbalanced closers": lambda: "\\boxed{5}" + "}" * 100_000,
    "NUL bytes": lambda: "\x00" * MB10,
    "binary junk as latin-1": lambda: os.urandom(MB10).decode("latin-1"),
    "binary junk as bytes": lambda: os.urandom(MB10),
    "lone surrogates": lambda: "\ud800\udfff" * 1000 + "#### 5 \udfff",
    "empty": lambda: "",
    "whitespace": lambda: " \n\t" * 1000,
}
"""Built per test, not at import: together they would hold a few hundred MB for the whole session."""

PATHOLOGICAL_LATEX = [
    r"10^{10^{10}}",
    r"9^{9^{9^{9}}}",
    r"\frac{1}{" * 60 + "2" + "}" * 60,
    "(" * 400 + "x" + ")" * 400,
    r"\sqrt{" * 120 + "2" + "}" * 120,
]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_extract_answer_survives(name):
    result = call_bounded(extract_answer, HOSTILE[name]())
    assert result is None or isinstance(result, str)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_verify_survives_as_response_and_as_reference(name):
    text = HOSTILE[name]()
    assert call_bounded(verify, text, "5") in (0.0, 1.0)
    assert call_bounded(verify, text, r"\frac{\pi}{2}") in (0.0, 1.0)
    assert call_bounded(verify, "#### 5", text) in (0.0, 1.0)


def test_answer_still_found_after_junk():
    assert call_bounded(verify, "\x00" * MB10 + "#### 5", "5") == 1.0
    assert call_bounded(verify, "{" * MB10 + "\nThe answer is 5.", "5") == 1.0
    assert call_bounded(verify, os.urandom(1_000_000) + b"\n\\boxed{5}", "5") == 1.0


@pytest.mark.parametrize(
    "value",
    [None, 5, 5.0, True, object(), ["#### 5"], {"answer": 5}, b"\xff\xfe\x00#### 5", bytearray(b"#### 5")],
    ids=lambda v: type(v).__name__,
)
def test_non_string_input(value):
    assert call_bounded(verify, value, "5") in (0.0, 1.0)
    assert call_bounded(verify, "#### 5", value) in (0.0, 1.0)
    found = call_bounded(extract_answer, value)
    assert found is None or isinstance(found, str)


def test_none_everywhere():
    assert verify(None, None) == 0.0
    assert extract_answer(None) is None


@pytest.mark.parametrize("latex", PATHOLOGICAL_LATEX, ids=range(len(PATHOLOGICAL_LATEX)))
def test_pathological_latex_is_cut_off(latex):
    assert call_bounded(verify, f"\\boxed{{{latex}}}", r"\frac{1}{3}", timeout=1.0) == 0.0
    assert call_bounded(verify, r"\boxed{\frac{1}{3}}", latex, timeout=1.0) == 0.0


def test_verify_recovers_after_a_timeout():
    assert call_bounded(verify, r"\boxed{10^{10^{10}}}", r"\frac{1}{3}", timeout=1.0) == 0.0
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0


def _verify_in_child(args: tuple[str, str]) -> float:
    return verify(*args, timeout=2.0)


def test_verify_inside_daemonic_pool_workers():
    """multiprocessing.Pool workers are daemonic and may not start multiprocessing children; the guard still works."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result = pool.map_async(
            _verify_in_child, [(r"\boxed{10^{10^{10}}}", r"\frac{1}{3}"), (r"\boxed{\sqrt{12}}", r"2\sqrt{3}")]
        )
        assert result.get(timeout=60) == [0.0, 1.0]


def test_guard_restarts_a_dead_helper():
    guard = LatexGuard()
    try:
        assert guard.equal(r"2\sqrt{3}", r"\sqrt{12}", timeout=10.0) is True
        guard._proc.kill()
        assert guard.equal(r"2\sqrt{3}", r"\sqrt{12}", timeout=10.0) is True
    finally:
        guard.close()


def test_guard_without_a_working_helper_fails_fast(monkeypatch):
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    guard = LatexGuard()
    assert call_bounded(guard.equal, "1", "x", 1.0) is None
    assert call_bounded(guard.equal, "1", "x", 1.0) is None
    guard.close()
