"""Answers that are not plain numbers, judged by math-verify through ``verify``'s time-limited worker process."""

from __future__ import annotations

import threading

import pytest

from ppo.envs.math import verify

from .bounded import call_bounded

LATEX_CASES = [
    (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
    (r"\boxed{\frac{1}{2}}", "0.5", 1.0),
    (r"The answer is $\dfrac{3}{4}$.", r"\frac{3}{4}", 1.0),
    (r"\boxed{\sqrt{2}}", r"\sqrt{2}", 1.0),
    (r"\boxed{1.41421356}", r"\sqrt{2}", 1.0),
    (r"\boxed{\sqrt{12}}", r"2\sqrt{3}", 1.0),
    (r"\boxed{3\sqrt{2}}", r"\sqrt{18}", 1.0),
    (r"\boxed{\frac{\sqrt3}{2}}", r"\frac{\sqrt{3}}{2}", 1.0),
    (r"\boxed{\sqrt{3}}", r"\sqrt{2}", 0.0),
    (r"\boxed{\pi/2}", r"\frac{\pi}{2}", 1.0),
    (r"\boxed{2\pi}", r"\pi", 0.0),
    (r"\boxed{x^2+1}", "1+x^2", 1.0),
    (r"\boxed{(0, 1]}", "(0,1]", 1.0),
    (r"\boxed{[0, 1]}", "(0,1]", 0.0),
    (r"\boxed{x \in [2, \infty)}", r"[2,\infty)", 1.0),
    (r"\boxed{(-\infty, 2) \cup (3, \infty)}", r"(-\infty,2)\cup(3,\infty)", 1.0),
    (r"\boxed{(-\infty, 2) \cup (3, \infty)}", r"(-\infty,2]\cup(3,\infty)", 0.0),
    (r"\boxed{\{1, 2\}}", r"\{2, 1\}", 1.0),
    (r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", 1.0),
    (r"\boxed{\begin{pmatrix}1\\3\end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", 0.0),
]


@pytest.mark.parametrize(("response", "truth", "reward"), LATEX_CASES)
def test_latex_answers(response, truth, reward):
    assert call_bounded(verify, response, truth) == reward


def test_verify_from_many_threads_at_once():
    """Threads share one worker; math-verify's own timeout would raise ValueError off the main thread."""
    results: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        for response, truth, _ in LATEX_CASES[:6]:
            value = verify(response, truth)
            with lock:
                results.append(value)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert results == [1.0] * 24
