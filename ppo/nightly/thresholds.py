"""Thresholds read off check expressions, so the dashboard can draw a check's value against its limit.

A check is parsed with :func:`ppo.metrics.parse_check` and its typed tree is only read here. It is split into
comparisons: the check itself when it is one, else each comparison joined to it by ``and`` (the parts that must
all hold). A comparison's *subject* is its first operand that is not a literal, as in
:class:`ppo.metrics.expressions.Evaluation`; each link between the subject and a literal is a threshold, turned
around so that it reads ``subject OP limit``::

    data["train/reward"]["40"] > 0.75              ->  subject > 0.75
    0.79 < min(data["train/probs_ratio_clamped_min"])  ->  subject > 0.79
    0 <= data["train/critic/loss"]["40"] < 6       ->  subject >= 0, subject < 6

Literals include constant arithmetic (``1 - 0.05``). A link between two non-literals has no threshold; a check
whose root is ``or`` or ``not`` is one comparison-less entry (its recorded value is still plotted when it is a
single number). Each comparison is also a standalone :class:`~ppo.metrics.expressions.Check` (its source text
re-parsed), so its value can be evaluated on a record's stored curves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ppo.metrics.expressions import (
    Arith,
    Check,
    Compare,
    EvaluationError,
    Logic,
    Num,
    Unary,
    parse_check,
)

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


@dataclass(frozen=True)
class Threshold:
    op: str
    value: float

    @property
    def label(self) -> str:
        return f"{self.op} {self.value:g}"


@dataclass(frozen=True)
class Comparison:
    source: str
    subject: str
    thresholds: tuple[Threshold, ...]
    check: Check | None


def comparisons(check: str | Check) -> list[Comparison]:
    """The comparisons of a check that must hold, each with its subject and thresholds."""
    parsed = check if isinstance(check, Check) else parse_check(check)
    root = parsed.root
    if isinstance(root, Compare):
        return [_comparison(root, parsed)]
    if isinstance(root, Logic) and root.op == "and":
        out = []
        for operand in _and_operands(root):
            if isinstance(operand, Compare):
                out.append(_comparison(operand, parse_check(operand.text)))
            else:
                out.append(Comparison(operand.text, operand.text, (), None))
        return out
    return [Comparison(parsed.source, parsed.source, (), None)]


def evaluate_subject(comparison: Comparison, data: Mapping[str, Mapping[str, float]]) -> float | None:
    """The comparison's subject on ``data`` (a record's curves), ``None`` when it cannot be evaluated there."""
    if comparison.check is None:
        return None
    try:
        value = comparison.check.evaluate(data).value
    except EvaluationError:
        return None
    return value if isinstance(value, float) else None


def literal_value(node) -> float | None:
    """The value of a constant subtree (numbers, unary +/-, abs, + - * /), ``None`` if it reads data."""
    match node:
        case Num(value=value):
            try:
                return float(value)
            except OverflowError:
                return math.inf if value > 0 else -math.inf
        case Unary(op="-", operand=operand):
            inner = literal_value(operand)
            return None if inner is None else -inner
        case Unary(op="+", operand=operand):
            return literal_value(operand)
        case Unary(op="abs", operand=operand):
            inner = literal_value(operand)
            return None if inner is None else abs(inner)
        case Arith(op=op, left=left, right=right):
            a, b = literal_value(left), literal_value(right)
            if a is None or b is None:
                return None
            if op == "/":
                return a / b if b != 0 else None
            return {"+": a + b, "-": a - b, "*": a * b}[op]
    return None


def _and_operands(node: Logic) -> list:
    out = []
    for operand in node.operands:
        if isinstance(operand, Logic) and operand.op == "and":
            out.extend(_and_operands(operand))
        else:
            out.append(operand)
    return out


def _comparison(node: Compare, standalone: Check) -> Comparison:
    literals = [literal_value(o) for o in node.operands]
    subject_index = next((i for i, v in enumerate(literals) if v is None), None)
    if subject_index is None:
        return Comparison(node.text, node.text, (), standalone)
    thresholds = []
    for i, op in enumerate(node.ops):
        left, right = i, i + 1
        if left == subject_index and literals[right] is not None:
            thresholds.append(Threshold(op, literals[right]))
        elif right == subject_index and literals[left] is not None:
            thresholds.append(Threshold(_FLIP[op], literals[left]))
    finite = tuple(t for t in thresholds if math.isfinite(t.value))
    return Comparison(node.text, node.operands[subject_index].text, finite, standalone)
