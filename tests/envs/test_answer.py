"""Answer extraction and normalisation, table-driven: each row is a grading convention a grader would apply."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ppo.envs.answer import format_number, normalize_answer, numbers_equal, parse_number
from ppo.envs.math import extract_answer, reference_answer, verify

EXTRACT_CASES = [
    # explicit markers
    ("#### 42", "42"),
    ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n#### 18", "18"),
    (r"so the result is \boxed{42}.", "42"),
    (r"\boxed{\frac{1}{2}}", "0.5"),
    (r"\boxed{\dfrac{1}{3}}", "1/3"),
    (r"\boxed{-\frac{3}{4}}", "-0.75"),
    (r"\boxed{\frac{-3}{4}}", "-0.75"),
    (r"\boxed{\frac12}", "0.5"),
    (r"\boxed 7", "7"),
    (r"\fbox{8}", "8"),
    ("<answer>42</answer>", "42"),
    ("<ANSWER> 42 </ANSWER>", "42"),
    (r"<answer>\boxed{12}</answer>", "12"),
    ("<answer>The total is 18 dollars.</answer>", "18"),
    ("<think>maybe 3</think><answer>9", "9"),
    ("The answer is 42.", "42"),
    ("THE ANSWER IS 42", "42"),
    ("The final answer is: 42", "42"),
    ("Answer: 42", "42"),
    ("answer: $1,234", "1234"),
    ("**Answer:** 17", "17"),
    ("The answer is: **18**", "18"),
    ("Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", "0.75"),
    ("The answer is \\(\\sqrt{2}\\).", "\\sqrt{2}"),
    ("The answer is approximately 3.5 hours.", "3.5"),
    # the last occurrence of the strongest marker wins, whatever follows it
    ("The answer is 42. Check: 3 + 4 = 7", "42"),
    (r"\boxed{3} Wait, let me redo this. \boxed{5} (verified: 2 + 2 = 4)", "5"),
    ("#### 10\nThe answer is 99", "10"),
    (r"The answer is 99. So \boxed{10}.", "10"),
    (r"<answer>4</answer> and \boxed{6}", "4"),
    ("Answer: 3\n...\nThe answer is 8. Then 100 more.", "8"),
    # markers that introduce prose are skipped
    ("#### Step 2: add the totals\n2 + 3 = 5\nThe answer is 5", "5"),
    ("The answer is computed below: 6 * 7 = 42", "42"),
    ("The answer is that she makes 18 dollars", "18"),
    # fallback: the last number
    ("She has 3 apples and buys 4, so 7 in total.", "7"),
    ("It costs $12.", "12"),
    ("1/2", "0.5"),
    ("-3", "-3"),
    ("nothing numeric here", None),
    ("", None),
]

NORMALIZE_CASES = [
    ("1,234", "1234"),
    ("1,234,567.50", "1234567.5"),
    ("$12", "12"),
    ("\\$12", "12"),
    ("12.00", "12"),
    ("12.", "12"),
    ("0.50", "0.5"),
    (".5", "0.5"),
    ("-3", "-3"),
    ("- 3", "-3"),
    ("−3", "-3"),
    ("+7", "7"),
    ("1/2", "0.5"),
    ("4/2", "2"),
    ("2/6", "1/3"),
    ("1 1/2", "1.5"),
    ("\\frac{1}{2}", "0.5"),
    ("\\tfrac{6}{4}", "1.5"),
    ("50%", "50"),
    ("50\\%", "50"),
    ("30^\\circ", "30"),
    ("30^{\\circ}", "30"),
    ("18 dollars", "18"),
    ("18 eggs per day", "18"),
    ("5cm", "5"),
    ("\\text{18 dollars}", "18"),
    ("18\\text{ cm}", "18"),
    ("x = 5", "5"),
    ("9 \\times 2 = 18", "18"),
    ("1,000 + 234 = 1,234", "1234"),
    ("x = 1 or x = 2", "x = 1 or x = 2"),
    ("x = 1, x = 2", "x = 1, x = 2"),
    ("**18**", "18"),
    ("1{,}000", "1000"),
    ("1\\,000", "1000"),
    ("$\\frac{\\pi}{2}$", "\\frac{\\pi}{2}"),
    ("1, 2, 3", "1, 2, 3"),
    ("1,2", "1,2"),
]


@pytest.mark.parametrize(("text", "expected"), EXTRACT_CASES)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(("span", "expected"), NORMALIZE_CASES)
def test_normalize_answer(span, expected):
    assert normalize_answer(span) == expected


@pytest.mark.parametrize(
    ("response", "truth", "reward"),
    [
        ("#### 18", "18", 1.0),
        ("#### 18.0", "18", 1.0),
        ("#### 18.000001", "18", 0.0),  # integer references are exact
        ("#### 19", "18", 0.0),
        ("#### -18", "18", 0.0),
        ("#### 1,200", "1200", 1.0),
        ("#### 1200", "1,200", 1.0),
        ("The answer is $1,200.00.", "1200", 1.0),
        ("The answer is 0.5", "1/2", 1.0),
        (r"\boxed{\frac{1}{2}}", "0.5", 1.0),
        ("#### 0.333333", "1/3", 1.0),  # within 1e-6 relative of a non-integer reference
        ("#### 0.33333", "1/3", 0.0),
        ("#### 0.3333333333", r"\frac{1}{3}", 1.0),
        ("#### 25%", "25", 1.0),
        ("#### 18", 18, 1.0),  # integer ground truths from a loader
        ("#### 2.5", 2.5, 1.0),
        ("#### 18", "Solution text.\n#### 18", 1.0),  # a whole reference solution
        ("#### 18", r"\boxed{18}", 1.0),
        (b"#### 18", "18", 1.0),  # bytes are decoded leniently
        ("no answer", "18", 0.0),
        ("#### 18", "", 0.0),
    ],
)
def test_verify_numeric(response, truth, reward):
    assert verify(response, truth) == reward


def test_reference_answer_forms_agree():
    forms = ["1200", "1,200", 1200, "$1,200", "1200.00", "Some working.\n#### 1,200", r"\boxed{1200}"]
    assert {reference_answer(f) for f in forms} == {"1200"}


def test_parse_number_is_exact():
    assert parse_number("0.1") == Fraction(1, 10)
    assert parse_number("\\frac{1}{3}") == Fraction(1, 3)
    assert parse_number("1/0") is None
    assert parse_number("x + 1") is None
    assert parse_number("9" * 5000) is None


def test_format_number_round_trips():
    for value in [Fraction(0), Fraction(-7), Fraction(1, 8), Fraction(-5, 2), Fraction(2, 3), Fraction(10**30 + 1, 4)]:
        assert parse_number(format_number(value)) == value


def test_numbers_equal_tolerance_only_for_non_integers():
    assert numbers_equal(Fraction(18), Fraction(18))
    assert not numbers_equal(Fraction(10**12), Fraction(10**12 + 1))
    assert numbers_equal(Fraction(1, 3), Fraction("0.333333"))
    assert not numbers_equal(Fraction(1, 3), Fraction("0.3333"))
