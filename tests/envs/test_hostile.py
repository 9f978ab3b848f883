"""``extract_answer`` and ``verify`` on hostile input: each returns promptly, never raises, and scores 0.0 or 1.0.

A policy under RL pressure produces exactly these: runaway repetition up to the length limit, unclosed braces,
binary garbage from a broken detokeniser, and LaTeX that sends SymPy into an endless computation.  Every call is
bounded (``call_bounded``) and runs off the main thread, where math-verify's signal-based timeout cannot help.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sys

import pytest

import ppo.envs.math
from ppo.envs.math import SymbolicPool, extract_answer, verify

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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("latex", PATHOLOGICAL_LATEX, ids=range(len(PATHOLOGICAL_LATEX)))
def test_pathological_latex_is_cut_off(latex):
    assert call_bounded(verify, f"\\boxed{{{latex}}}", r"\frac{1}{3}", timeout=1.0) == 0.0
    assert call_bounded(verify, r"\boxed{\frac{1}{3}}", latex, timeout=1.0) == 0.0


@pytest.mark.slow
def test_verify_recovers_after_a_timeout():
    assert call_bounded(verify, r"\boxed{10^{10^{10}}}", r"\frac{1}{3}", timeout=1.0) == 0.0
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0


def _verify_in_child(args: tuple[str, str]) -> float:
    return verify(*args, timeout=2.0)


def test_verify_inside_daemonic_pool_workers():
    """multiprocessing.Pool workers are daemonic and may not start processes, so verify cannot start the worker that
    bounds math-verify there: it still returns at once and never raises, plain numbers are still exact, and answers
    that need math-verify score 0.0."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result = pool.map_async(_verify_in_child, [(r"\boxed{10^{10^{10}}}", r"\frac{1}{3}"),
                                                   (r"\boxed{\sqrt{12}}", r"2\sqrt{3}"), ("#### 1,200", "1200")])
        assert result.get(timeout=60) == [0.0, 0.0, 1.0]


def _verify_or_fail() -> None:
    sys.exit(0 if verify(r"\boxed{\sqrt{12}}", r"2\sqrt{3}", timeout=10.0) == 1.0 else 3)


@pytest.mark.slow
def test_a_forked_child_verifies_with_its_own_worker():
    """The parent's worker belongs to the parent: a forked child starts its own and leaves the parent's alone."""
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0
    child = multiprocessing.get_context("fork").Process(target=_verify_or_fail)
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0


@pytest.mark.slow
def test_verify_restarts_a_dead_worker():
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0
    for process in list(ppo.envs.math._SYMBOLIC._pool._executor._processes.values()):
        os.kill(process.pid, signal.SIGKILL)
        process.join(10)
    assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}") == 1.0


@pytest.mark.slow
def test_verify_without_a_working_worker_fails_fast(monkeypatch):
    """A worker that cannot start (here its initializer exits; in life, math-verify missing or broken) costs a few
    failed starts, never a hang, and the answer scores 0.0."""
    broken = SymbolicPool(initializer=sys.exit)
    monkeypatch.setattr(ppo.envs.math, "_SYMBOLIC", broken)
    try:
        assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}", timeout=1.0) == 0.0
        assert call_bounded(verify, r"\boxed{\sqrt{12}}", r"2\sqrt{3}", timeout=1.0) == 0.0
    finally:
        broken.close()
