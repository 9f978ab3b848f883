"""Final-answer extraction and numeric normalisation, read the way math graders read a response.

Graders (GSM8K's ``#### N``, Minerva/MATH's ``\\boxed{}``, R1-style ``<answer>`` tags, lm-eval's "The answer is N")
agree on two rules this module keeps: an explicit answer marker beats any number that merely appears in the text,
and among several markers of the same kind the last one is the model's final word.  Only when no marker is present
does the last number in the text count, as lm-eval's "flexible-extract" does.

Everything here is plain Python with linear-time scans bounded per candidate, so a 10 MB response, a million
``\\boxed{`` openings or braces nested 10k deep cost milliseconds rather than a stalled training step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction

MAX_SPAN = 20_000
"""Longest ``\\boxed{...}`` or ``<answer>`` body examined; a longer (or unclosed) one is not an answer."""
LINE_SPAN = 400
"""Characters after a ``####`` / "the answer is" / "Answer:" marker in which the answer must start and end."""
MAX_CANDIDATES = 32
"""Occurrences of one marker tried, newest first, before falling through to a weaker marker."""
REL_TOL = Fraction(1, 10**6)
"""Relative tolerance for non-integer references: ``0.333333`` matches ``1/3`` and ``0.33333`` does not."""

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+"
_SIGNED = rf"[-+]?(?:{_NUM})"
_NUMBER_RE = re.compile(_SIGNED)
_RATIO_RE = re.compile(rf"({_SIGNED})\s*/\s*({_SIGNED})")
_MIXED_RE = re.compile(r"([-+]?)(\d+)\s+(\d+)\s*/\s*(\d+)")
_FRAC_RE = re.compile(rf"([-+]?)\\frac\s*\{{\s*({_SIGNED})\s*\}}\s*\{{\s*({_SIGNED})\s*\}}")
_FRAC_DIGITS_RE = re.compile(r"([-+]?)\\frac(\d)(\d)")
_UNIT_SUFFIX_RE = re.compile(
    rf"({_SIGNED})(?:\s+[A-Za-z][A-Za-z.]*(?:\s+[A-Za-z][A-Za-z.]*)*"
    r"|\s*(?:cm|mm|km|kg|mg|g|lbs?|oz|ft|in|mi|m|hrs?|h|mins?|s|secs?|mph|ml|l)\.?)"
)
_LAST_NUMBER_RE = re.compile(rf"-?(?:{_NUM})(?:\s*/\s*\d+)?")
_TEXT_WRAPPER_RE = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_THIN_SPACE_THOUSANDS_RE = re.compile(r"(?<=\d)\\[,!]\s*(?=\d{3}(?!\d))")
_LATEX_SPACING_RE = re.compile(r"(?<!\\)\\[,;:! ]|\\(?:left|right|displaystyle)\b|\\[qs]?quad\b")
_ALTERNATIVES_RE = re.compile(r"\b(?:or|and)\b|,(?!\d{3}(?!\d))")
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z]\w{0,2}\s*=\s*")
_LEADING_FILLER_RE = re.compile(
    r"^(?:(?:approximately|approx\.?|about|exactly|roughly|equal to|equals|therefore|thus|so|then|now)\b|[=≈~:])\s*",
    re.I,
)
_SENTENCE_END_RE = re.compile(r"[.,;!?](?=\s|$)|\n")
_PHRASE_RE = re.compile(r"answer\s{0,3}(?:\*\*|__)?\s{0,3}(?:is\b|:)\s{0,3}(?:\*\*|__)?\s{0,3}:?")
_PROSE_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_ASCII_UPPER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def extract_answer(text: object) -> str | None:
    """The normalised final answer of a response, or None when it states none.

    Markers, strongest first: an ``<answer>...</answer>`` tag (what R1-style prompts ask for), ``\\boxed{...}`` /
    ``\\fbox{...}`` (MATH, DAPO, AIME graders), GSM8K's ``#### N``, then "the answer is N" / "Answer: N" in any case.
    The last occurrence of the strongest marker present wins even when numbers follow it ("The answer is 18. Check:
    3 + 4 = 7" gives 18), because self-checks and restatements after the answer are common and graders ignore them.
    Only when no marker yields an answer does the last number in the text count.  Non-``str`` input (other than
    UTF-8 bytes) yields None.
    """
    text = as_text(text)
    if not text:
        return None
    low = _ascii_lower(text)
    found = _from_answer_tag(text, low)
    if found is None:
        found = _from_markers(text, low)
    if found is None:
        number = _last_number(text)
        found = normalize_answer(number) if number else None
    return found or None


def normalize_answer(span: str) -> str:
    """Canonical text of one answer span, so that equal answers written differently compare equal as strings.

    Graders accept ``$1,234``, ``1234.00``, ``1234 dollars``, ``x = 1234`` and ``1234\\%`` for 1234, so currency signs,
    thousands separators, trailing zeros, units, percent and degree signs, a leading variable assignment, LaTeX
    spacing and ``\\text{}`` wrappers, math delimiters, markdown emphasis and a trailing period are dropped, and a
    worked equation keeps only its numeric result ("9 \\times 2 = 18"), unless it lists alternatives ("x = 1 or
    x = 2").  A numeric answer comes back in one canonical spelling (integers as ``"12"``, terminating decimals as
    ``"0.5"``, other ratios as ``"1/3"``); anything else comes back cleaned but otherwise as written, for
    math-verify to judge.
    """
    s = _clean(span)
    value = parse_number(s)
    if value is not None:
        return format_number(value)
    if "=" in s and not _ALTERNATIVES_RE.search(s):
        value = parse_number(s.rsplit("=", 1)[1].strip())
        if value is not None:
            return format_number(value)
    return s


def parse_number(s: str) -> Fraction | None:
    """The exact value of a cleaned answer that is a plain number, else None.

    Plain numbers are integers, decimals, ``a/b``, mixed numbers ``1 1/2``, ``\\frac{a}{b}``, and any of these
    followed by unit words ("18 dollars", "5cm").  Exact rationals keep integer answers exact and let ``1/2``,
    ``\\frac{1}{2}`` and ``0.50`` meet without float rounding.  Anything else (an expression, a set, prose, a
    number too long for ``int``) is None.
    """
    s = s.strip()
    if not s or len(s) > 4000:
        return None
    try:
        if m := _NUMBER_RE.fullmatch(s):
            return _decimal(m.group())
        if m := _RATIO_RE.fullmatch(s):
            return _ratio(m.group(1), m.group(2))
        if (m := _MIXED_RE.fullmatch(s)) and 0 < int(m.group(3)) < int(m.group(4)):
            value = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
            return -value if m.group(1) == "-" else value
        if m := _FRAC_RE.fullmatch(s):
            value = _ratio(m.group(2), m.group(3))
            return -value if value is not None and m.group(1) == "-" else value
        if m := _FRAC_DIGITS_RE.fullmatch(s):
            value = _ratio(m.group(2), m.group(3))
            return -value if value is not None and m.group(1) == "-" else value
        if m := _UNIT_SUFFIX_RE.fullmatch(s):
            return _decimal(m.group(1))
    except (ValueError, ArithmeticError):
        return None
    return None


def format_number(value: Fraction) -> str:
    """Integers as ``"12"``, terminating fractions as their shortest decimal, other rationals as ``"a/b"``."""
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1 and value.denominator < 10**18:
        text = format((Decimal(value.numerator) / Decimal(value.denominator)).normalize(), "f")
        if Fraction(text) == value:
            return text
    return f"{value.numerator}/{value.denominator}"


def numbers_equal(reference: Fraction, candidate: Fraction) -> bool:
    """Exact for an integer reference (GSM8K, AIME), within ``REL_TOL`` otherwise (rounded decimals vs fractions)."""
    if reference == candidate:
        return True
    if reference.denominator == 1:
        return False
    return abs(reference - candidate) <= REL_TOL * max(abs(reference), abs(candidate))


def as_text(value: object) -> str | None:
    """``str`` as is, bytes decoded leniently (junk bytes become U+FFFD), anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return None


def _decimal(text: str) -> Fraction:
    text = text.replace(",", "")
    if text.endswith("."):
        text = text[:-1]
    return Fraction(text)


def _ratio(numerator: str, denominator: str) -> Fraction | None:
    den = _decimal(denominator)
    return None if den == 0 else _decimal(numerator) / den


def _ascii_lower(text: str) -> str:
    """Lower-cased text whose indices still line up with ``text`` (``str.lower`` can lengthen, e.g. ``İ``)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_UPPER)


def _clean(span: str) -> str:
    s = span.strip()
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("{,}", ",").replace("−", "-")
    s = _TEXT_WRAPPER_RE.sub(r"\1", s)
    s = _THIN_SPACE_THOUSANDS_RE.sub("", s)
    s = _LATEX_SPACING_RE.sub(" ", s)
    for token in ("^{\\circ}", "^\\circ", "\\circ", "°", "\\%", "%", "\\$", "$", "\\(", "\\)", "\\[", "\\]"):
        s = s.replace(token, "")
    s = " ".join(s.split())
    s = s.strip("*_ ").rstrip(".").strip("*_ ")
    s = _ASSIGNMENT_RE.sub("", s) if parse_number(_ASSIGNMENT_RE.sub("", s)) is not None else s
    if len(s) > 2 and s[0] in "-+" and s[1] == " ":
        s = s[0] + s[2:]
    return s


def _rfind_all(low: str, needle: str, limit: int = MAX_CANDIDATES, end: int | None = None) -> Iterator[int]:
    end = len(low) if end is None else end
    for _ in range(limit):
        pos = low.rfind(needle, 0, end)
        if pos < 0:
            return
        yield pos
        end = pos


def _from_answer_tag(text: str, low: str) -> str | None:
    """A response cut off by the length limit may open ``<answer>`` and never close it: then the tag counts like
    "Answer:", for the answer that starts right after it."""
    for pos in _rfind_all(low, "<answer>"):
        start = pos + len("<answer>")
        close = low.find("</answer>", start, start + MAX_SPAN)
        if close >= 0:
            found = _answer_in_body(text[start:close])
        else:
            found = normalize_answer(_leading_answer(text[start : start + LINE_SPAN]))
            found = found if _looks_like_answer(found) else None
        if found:
            return found
    return None


def _answer_in_body(body: str) -> str | None:
    """An ``<answer>`` body may hold a bare answer, a boxed one, or a sentence that contains one."""
    low = _ascii_lower(body)
    found = _from_markers(body, low)
    if found:
        return found
    cleaned = normalize_answer(body)
    if not cleaned or parse_number(cleaned) is not None or len(_PROSE_WORD_RE.findall(cleaned)) < 2:
        return cleaned or None
    number = _last_number(body)
    return normalize_answer(number) if number else cleaned


def _from_markers(text: str, low: str) -> str | None:
    finders: tuple[tuple[Callable[[str, str], Iterator[str]], Callable[[str], bool]], ...] = (
        (_boxed_spans, bool),
        (_hash_spans, _looks_like_answer),
        (_phrase_spans, _looks_like_answer),
    )
    for spans, accept in finders:
        for span in spans(text, low):
            found = normalize_answer(span)
            if found and accept(found):
                return found
    return None


def _boxed_spans(text: str, low: str) -> Iterator[str]:
    positions = sorted({*_rfind_all(low, "\\boxed"), *_rfind_all(low, "\\fbox")}, reverse=True)
    for pos in positions[:MAX_CANDIDATES]:
        start = pos + (len("\\boxed") if low.startswith("\\boxed", pos) else len("\\fbox"))
        while start < len(text) and start - pos < 16 and text[start] in " \t":
            start += 1
        if start < len(text) and text[start] == "{":
            body = _braced(text, start)
            if body is not None:
                yield body
        elif start < len(text) and text[start - 1] in " \t":
            yield re.split(r"[\s$]", text[start : start + LINE_SPAN], maxsplit=1)[0]


def _braced(text: str, open_pos: int) -> str | None:
    """Body of the brace group opening at ``open_pos``; escaped ``\\{``/``\\}`` do not count; None if unclosed."""
    depth = 0
    i = open_pos
    stop = min(len(text), open_pos + MAX_SPAN)
    while i < stop:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_pos + 1 : i]
        i += 1
    return None


def _hash_spans(text: str, low: str) -> Iterator[str]:
    for pos in _rfind_all(low, "####"):
        if pos > 0 and text[pos - 1] == "#":
            continue
        yield _leading_answer(text[pos + 4 : pos + 4 + LINE_SPAN])


def _phrase_spans(text: str, low: str) -> Iterator[str]:
    for pos in _rfind_all(low, "answer"):
        if pos > 0 and low[pos - 1].isalpha():
            continue
        m = _PHRASE_RE.match(low[pos : pos + 32])
        if m:
            start = pos + m.end()
            yield _leading_answer(text[start : start + LINE_SPAN])


def _leading_answer(segment: str) -> str:
    """The answer at the start of the text after a marker: a math-delimited span, or up to the sentence's end."""
    s = segment.lstrip(" \t\r\n*_:")
    for _ in range(3):
        stripped = _LEADING_FILLER_RE.sub("", s, count=1).lstrip(" \t*_")
        if stripped == s:
            break
        s = stripped
    for opener, closer in (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]"), ("$", "$")):
        if s.startswith(opener):
            close = s.find(closer, len(opener))
            if close > len(opener) and "\n" not in s[len(opener) : close]:
                return s[len(opener) : close]
            s = s[len(opener) :]
            break
    m = _SENTENCE_END_RE.search(s)
    return s[: m.start()] if m else s


def _looks_like_answer(found: str) -> bool:
    """Line markers also open prose ("The answer is computed below", a markdown "#### Step 2" heading): their span
    must carry maths and at most one word, else the marker is skipped rather than the prose returned as an answer."""
    return any(c.isdigit() or c in "\\π√∞" for c in found) and len(_PROSE_WORD_RE.findall(found)) < 2


def _last_number(text: str) -> str | None:
    """The last number in the text, found from the end so a huge response costs one reverse scan."""
    last_digit = max(text.rfind(d) for d in "0123456789")
    if last_digit < 0:
        return None
    window = text[max(0, last_digit - 200) : last_digit + 1]
    matches = list(_LAST_NUMBER_RE.finditer(window))  # the window holds at most 201 characters
    return matches[-1].group() if matches else None
