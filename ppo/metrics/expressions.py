"""The check language: the reference's nightly-threshold expressions, parsed and evaluated without ``eval``.

A check reads like the Python the reference ``eval``\\ s, e.g.::

    data["train/reward"]["40"] > 0.75
    0.79 < min(data["train/probs_ratio_clamped_min"]) and max(data["train/probs_ratio_clamped_max"]) < 1.29
    mean(data["train/token_mult_prob_error"], -10, ignore_top_p=0.05) < 1.05

but it is only ever handed to ``ast.parse`` and then translated, node by node, into a small typed tree of its own
(below); nothing is compiled or executed, so there is no sandbox to escape. The grammar, with three value types
(number, boolean, series):

- ``data["<metric>"]`` is a series; ``data["<metric>"]["<step>"]`` (or ``[40]``) is a number. Keys must be literal
  strings (integers for steps), so every (metric, step) a check reads is known before it runs — which is how an
  unreached step is told apart from a regression (see :mod:`ppo.metrics.checks`).
- a series where a number is expected (``data["score"] >= 0.24``) stands for its only value: it must hold exactly
  one step, as a flat score file ``{"score": v}`` does (:mod:`ppo.metrics.loader`); on a longer series the check
  is an :class:`EvaluationError` that says to pick a step or reduce it.
- number literals, ``True``/``False``; ``+ - * /`` and unary ``-``/``+`` on numbers. ``**`` is refused: thresholds
  never need it (write ``1e-3``), and ``9**9**9`` would otherwise stall the checker.
- comparisons ``< <= > >= == !=`` between numbers, chained as in Python (``0 <= x < 6``).
- ``and``, ``or``, ``not`` on booleans (and they return booleans, not an operand as Python's do).
- the helpers of :mod:`ppo.metrics.series`: ``min(d)``, ``max(d)``, ``mean(d, range_start=1, range_end=0,
  ignore_top_p=0.0)``, ``median(d, range_start=1, range_end=0)``, ``ratio_above(d, threshold)``, whose first
  argument is a series and the others numbers. Ranges count entries, not step numbers; see that module.
- ``abs(x)`` of a number, as the reference's checks write ``abs(data["train/loss"]["1"] - 0.6931) < 0.0005``.

A whole check must be a boolean. Everything else — other names and calls, attribute access, lambdas,
comprehensions, containers, f-strings, walrus, starred arguments, strings outside a subscript, dunder keys — is
refused by :func:`parse_check` with an :class:`ExpressionError` that names the offending part. Size is bounded
before anything recursive runs: at most ``MAX_LENGTH`` characters and ``MAX_DEPTH`` levels of nesting.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ppo.metrics.encoding import format_value
from ppo.metrics.series import (
    SeriesError,
    ratio_above,
    series_max,
    series_mean,
    series_median,
    series_min,
)

MAX_LENGTH = 4096
MAX_DEPTH = 64

NUMBER, BOOLEAN, SERIES = "number", "boolean", "series"


class CheckError(Exception):
    """Base of every error a check can raise."""


class ExpressionError(CheckError):
    """The expression is not in the check language (or is too large); raised by :func:`parse_check`."""


class EvaluationError(CheckError):
    """The expression is valid but cannot be evaluated on this data (division by zero, an empty range, ...)."""


class MissingDataError(EvaluationError):
    """A metric, or a step of a metric, that the check reads is not in the data."""

    def __init__(self, message: str, metric: str, step: str | None = None) -> None:
        super().__init__(message)
        self.metric = metric
        self.step = step


@dataclass(frozen=True)
class _HelperSpec:
    function: Callable[..., float]
    params: tuple[str, ...]
    required: int


HELPERS: dict[str, _HelperSpec] = {
    "min": _HelperSpec(series_min, ("d",), 1),
    "max": _HelperSpec(series_max, ("d",), 1),
    "mean": _HelperSpec(series_mean, ("d", "range_start", "range_end", "ignore_top_p"), 1),
    "median": _HelperSpec(series_median, ("d", "range_start", "range_end"), 1),
    "ratio_above": _HelperSpec(ratio_above, ("d", "threshold"), 2),
}
NUMBER_FUNCTIONS: dict[str, Callable[[Any], Any]] = {"abs": abs}
"""Functions of one number, each a :class:`Unary` node whose ``op`` is its name."""

_COMPARE_OPS: dict[type[ast.cmpop], tuple[str, Callable[[Any, Any], bool]]] = {
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
}
_ARITH_OPS: dict[type[ast.operator], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
}
_COMPARE_FNS = dict(_COMPARE_OPS.values())
_ARITH_FNS = dict(_ARITH_OPS.values())
_REFUSED_KINDS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.GeneratorExp: "generator expression",
    ast.JoinedStr: "f-string",
    ast.FormattedValue: "f-string",
    ast.NamedExpr: "assignment expression (:=)",
    ast.Starred: "starred expression",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Dict: "dict",
    ast.Set: "set",
    ast.IfExp: "conditional expression",
    ast.Slice: "slice",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}
_REFUSED_COMPARISONS = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_STEP_KEY = re.compile(r"[0-9]+")


# ---- the typed tree a check is translated into --------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    text: str


@dataclass(frozen=True)
class Num(Node):
    value: int | float


@dataclass(frozen=True)
class Bool(Node):
    value: bool


@dataclass(frozen=True)
class SeriesRef(Node):
    metric: str


@dataclass(frozen=True)
class PointRef(Node):
    metric: str
    step: str


@dataclass(frozen=True)
class OnlyValue(Node):
    """A series where a number is expected: the value of its only step."""

    series: SeriesRef


@dataclass(frozen=True)
class Unary(Node):
    op: str
    operand: Node


@dataclass(frozen=True)
class Arith(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Compare(Node):
    operands: tuple[Node, ...]
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Logic(Node):
    op: str
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class HelperCall(Node):
    name: str
    series: SeriesRef
    kwargs: tuple[tuple[str, Node], ...]


@dataclass(frozen=True)
class Evaluation:
    """The outcome of one check on one data set.

    ``value`` is what a table should show next to the check: for a comparison, its subject (the first operand that
    is not a literal, so ``0.79 < x`` shows ``x``); for a boolean combination, the subjects of the comparisons
    that ran, as a tuple (or a single float if only one ran).
    """

    passed: bool
    value: float | tuple[float, ...] | None
    message: str


@dataclass(frozen=True)
class Check:
    """A parsed check; build with :func:`parse_check`."""

    source: str
    root: Node
    points: tuple[PointRef, ...] = ()
    metrics: tuple[str, ...] = ()

    def evaluate(self, data: Mapping[str, Mapping[str, float]]) -> Evaluation:
        """Evaluate on reference-layout data. Raises :class:`EvaluationError` (:class:`MissingDataError` for a
        metric or step not in ``data``)."""
        trace = _Trace()
        result = _evaluate(self.root, data, trace)
        value: float | tuple[float, ...] | None
        if isinstance(self.root, Compare) or len(trace.subjects) == 1:
            value = trace.subjects[0] if trace.subjects else None
        else:
            value = tuple(trace.subjects) or None
        if result:
            return Evaluation(True, value, "")
        if trace.false_links and not isinstance(self.root, Unary):
            return Evaluation(False, value, "false: " + "; ".join(trace.false_links))
        return Evaluation(False, value, "condition is false")


def parse_check(source: str) -> Check:
    """Translate a check into its typed tree, or raise :class:`ExpressionError` naming what is not allowed."""
    if not isinstance(source, str):
        raise ExpressionError(f"a check must be a string, got {type(source).__name__}")
    text = source.strip()
    if not text:
        raise ExpressionError("empty check")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"check is {len(text)} characters long; the limit is {MAX_LENGTH}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise ExpressionError(f"not a valid expression: {exc.msg}{where}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionError(f"not a valid expression: {type(exc).__name__}: {exc}") from None
    _check_depth(tree.body)
    builder = _Builder(text)
    root, kind = builder.build(tree.body)
    if kind != BOOLEAN:
        raise ExpressionError(
            f"a check must be a comparison (e.g. data[\"train/reward\"][\"40\"] > 0.75) or a combination of "
            f"comparisons with and/or/not; {_quote(root.text)} is a {kind}"
        )
    metrics = tuple(dict.fromkeys(builder.metrics))
    return Check(text, root, tuple(builder.points), metrics)


def evaluate_check(source: str, data: Mapping[str, Mapping[str, float]]) -> Evaluation:
    """``parse_check(source).evaluate(data)``."""
    return parse_check(source).evaluate(data)


def _check_depth(root: ast.AST) -> None:
    """Bound nesting iteratively, before the recursive translation and evaluation could hit the recursion limit."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"check nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class _Builder:
    """Translates a depth-checked ``ast`` expression into the typed tree, collecting every metric and step read."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.points: list[PointRef] = []
        self.metrics: list[str] = []

    def text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def refuse(self, node: ast.AST, what: str, hint: str = "") -> ExpressionError:
        where = ""
        if hasattr(node, "lineno") and hasattr(node, "col_offset"):
            line = self.source.splitlines()[node.lineno - 1]
            column = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "ignore")) + 1
            where = f" (column {column})" if node.lineno == 1 else f" (line {node.lineno}, column {column})"
        return ExpressionError(f"{what} is not allowed: {_quote(self.text(node))}{where}{'; ' + hint if hint else ''}")

    def build(self, node: ast.expr) -> tuple[Node, str]:
        text = self.text(node)
        match node:
            case ast.Constant(value=bool() as value):
                return Bool(text, value), BOOLEAN
            case ast.Constant(value=int() | float() as value):
                return Num(text, value), NUMBER
            case ast.Constant(value=str()):
                raise self.refuse(node, "a string outside a subscript", 'strings are only keys: data["metric"]["step"]')
            case ast.Constant():
                raise self.refuse(node, f"a {type(node.value).__name__} literal")
            case ast.Subscript():
                return self.subscript(node)
            case ast.Name(id="data"):
                raise self.refuse(node, "bare 'data'", 'index it with a metric name: data["train/reward"]')
            case ast.Name(id=name) if name in HELPERS or name in NUMBER_FUNCTIONS:
                argument = 'data["..."]' if name in HELPERS else "x"
                raise self.refuse(node, f"helper {name!r} without a call", f"call it: {name}({argument})")
            case ast.Name(id=name):
                raise self.refuse(node, f"the name {name!r}", f"the only names are data and {_helper_names()}")
            case ast.UnaryOp(op=ast.Not()):
                return Unary(text, "not", self.expect(node.operand, BOOLEAN, "the operand of 'not'")), BOOLEAN
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                op = "-" if isinstance(node.op, ast.USub) else "+"
                return Unary(text, op, self.expect(node.operand, NUMBER, f"the operand of unary '{op}'")), NUMBER
            case ast.BinOp(op=ast.Pow()):
                raise self.refuse(node, "the operator '**'", "write the constant instead (e.g. 1e-3)")
            case ast.BinOp(op=op) if type(op) in _ARITH_OPS:
                symbol = _ARITH_OPS[type(op)][0]
                left = self.expect(node.left, NUMBER, f"the left operand of '{symbol}'")
                right = self.expect(node.right, NUMBER, f"the right operand of '{symbol}'")
                return Arith(text, symbol, left, right), NUMBER
            case ast.BinOp():
                raise self.refuse(node, f"the operator {type(node.op).__name__}", "only + - * / are allowed")
            case ast.BoolOp():
                op = "and" if isinstance(node.op, ast.And) else "or"
                operands = tuple(self.expect(v, BOOLEAN, f"an operand of '{op}'") for v in node.values)
                return Logic(text, op, operands), BOOLEAN
            case ast.Compare():
                return self.compare(node), BOOLEAN
            case ast.Call():
                return self.call(node), NUMBER
        kind = _REFUSED_KINDS.get(type(node), f"a {type(node).__name__} expression")
        raise self.refuse(node, kind)

    def expect(self, node: ast.expr, kind: str, role: str) -> Node:
        built, actual = self.build(node)
        if kind == NUMBER and actual == SERIES:
            assert isinstance(built, SeriesRef)
            return OnlyValue(built.text, built)
        if actual != kind:
            hint = ""
            if actual == SERIES:
                hint = f"; pick a step ({built.text}[\"<step>\"]) or reduce it ({', '.join(HELPERS)})"
            raise ExpressionError(f"{role} must be a {kind}, but {_quote(built.text)} is a {actual}{hint}")
        return built

    def subscript(self, node: ast.Subscript) -> tuple[Node, str]:
        text = self.text(node)
        inner = node.value
        if isinstance(inner, ast.Name) and inner.id == "data":
            metric = self.metric_key(node.slice)
            self.metrics.append(metric)
            return SeriesRef(text, metric), SERIES
        if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id == "data":
            metric = self.metric_key(inner.slice)
            step = self.step_key(node.slice)
            point = PointRef(text, metric, step)
            self.metrics.append(metric)
            self.points.append(point)
            return point, NUMBER
        raise self.refuse(node, "this subscript", 'only data["<metric>"] and data["<metric>"]["<step>"] are indexable')

    def metric_key(self, node: ast.expr) -> str:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            raise self.refuse(node, "a metric key that is not a string literal")
        if node.value.startswith("__") and node.value.endswith("__"):
            raise self.refuse(node, "a dunder key")
        return node.value

    def step_key(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return str(value)
            if isinstance(value, str) and _STEP_KEY.fullmatch(value.strip()):
                return str(int(value))
        raise self.refuse(node, "this step key", 'a step is a non-negative integer, "40" or 40')

    def compare(self, node: ast.Compare) -> Compare:
        ops = []
        for op in node.ops:
            if type(op) not in _COMPARE_OPS:
                symbol = _REFUSED_COMPARISONS.get(type(op), type(op).__name__)
                raise self.refuse(node, f"the comparison {symbol!r}", "use < <= > >= == !=")
            ops.append(_COMPARE_OPS[type(op)][0])
        operands = tuple(
            self.expect(operand, NUMBER, "a compared value") for operand in (node.left, *node.comparators)
        )
        return Compare(self.text(node), operands, tuple(ops))

    def call(self, node: ast.Call) -> HelperCall | Unary:
        if not isinstance(node.func, ast.Name):
            raise self.refuse(node, "this call", f"only the helpers {_helper_names()} can be called")
        name = node.func.id
        if name in NUMBER_FUNCTIONS:
            return self.number_call(node, name)
        spec = HELPERS.get(name)
        if spec is None:
            raise self.refuse(node, f"a call to {name!r}", f"the helpers are {_helper_names()}")
        bound: dict[str, ast.expr] = {}
        if len(node.args) > len(spec.params):
            raise self.refuse(node, f"{name}() with {len(node.args)} positional arguments", _signature(name))
        for param, arg in zip(spec.params, node.args):
            if isinstance(arg, ast.Starred):
                raise self.refuse(arg, "a starred argument")
            bound[param] = arg
        for keyword in node.keywords:
            if keyword.arg is None:
                raise self.refuse(keyword.value, "a **keyword argument")
            if keyword.arg not in spec.params:
                raise self.refuse(node, f"{name}() with the keyword {keyword.arg!r}", _signature(name))
            if keyword.arg in bound:
                raise self.refuse(node, f"{name}() with {keyword.arg!r} given twice", _signature(name))
            bound[keyword.arg] = keyword.value
        missing = [p for p in spec.params[: spec.required] if p not in bound]
        if missing:
            raise self.refuse(node, f"{name}() without {', '.join(missing)}", _signature(name))
        series = self.expect(bound.pop("d"), SERIES, f"the first argument of {name}()")
        assert isinstance(series, SeriesRef)
        kwargs = tuple(
            (param, self.expect(bound[param], NUMBER, f"{name}() argument {param!r}"))
            for param in spec.params
            if param in bound
        )
        return HelperCall(self.text(node), name, series, kwargs)

    def number_call(self, node: ast.Call, name: str) -> Unary:
        if len(node.args) != 1 or node.keywords or isinstance(node.args[0], ast.Starred):
            raise self.refuse(node, f"this call of {name}()", f"the signature is {name}(x), x a number")
        return Unary(self.text(node), name, self.expect(node.args[0], NUMBER, f"the argument of {name}()"))


def _helper_names() -> str:
    return ", ".join([*HELPERS, *NUMBER_FUNCTIONS])


def _signature(name: str) -> str:
    spec = HELPERS[name]
    defaults = {"range_start": "1", "range_end": "0", "ignore_top_p": "0.0"}
    params = [p if i < spec.required else f"{p}={defaults[p]}" for i, p in enumerate(spec.params)]
    return f"the signature is {name}({', '.join(params)})"


# ---- evaluation ---------------------------------------------------------------------------------------------------


@dataclass
class _Trace:
    subjects: list[float] = field(default_factory=list)
    false_links: list[str] = field(default_factory=list)


def _evaluate(node: Node, data: Mapping[str, Mapping[str, float]], trace: _Trace) -> Any:
    match node:
        case Num(value=value) | Bool(value=value):
            return value
        case SeriesRef(metric=metric):
            return _series(data, metric)
        case OnlyValue(series=series_ref):
            series = _evaluate(series_ref, data, trace)
            if len(series) != 1:
                raise EvaluationError(
                    f"{_quote(node.text)} is a series of {len(series)} steps where a number is expected: pick a step "
                    f"({node.text}[\"<step>\"]) or reduce it ({', '.join(HELPERS)})"
                )
            return next(iter(series.values()))
        case PointRef(metric=metric, step=step):
            series = _series(data, metric)
            if step not in series:
                last = max((int(s) for s in series), default=None)
                raise MissingDataError(f"metric {metric!r} has no step {step!r} (last step {last})", metric, step)
            return series[step]
        case Unary(op="not", operand=operand):
            return not _evaluate(operand, data, trace)
        case Unary(op=op, operand=operand):
            value = _evaluate(operand, data, trace)
            return NUMBER_FUNCTIONS[op](value) if op in NUMBER_FUNCTIONS else (-value if op == "-" else +value)
        case Arith(op=op, left=left, right=right):
            a, b = _evaluate(left, data, trace), _evaluate(right, data, trace)
            try:
                return _ARITH_FNS[op](a, b)
            except ZeroDivisionError:
                raise EvaluationError(f"division by zero in {_quote(node.text)}") from None
            except OverflowError:
                raise EvaluationError(f"overflow in {_quote(node.text)}") from None
        case Logic(op="and", operands=operands):
            return all(_evaluate(o, data, trace) for o in operands)
        case Logic(operands=operands):
            return any(_evaluate(o, data, trace) for o in operands)
        case Compare():
            return _compare(node, data, trace)
        case HelperCall(name=name, series=series_ref, kwargs=kwargs):
            series = _evaluate(series_ref, data, trace)
            args = {param: _evaluate(arg, data, trace) for param, arg in kwargs}
            try:
                return HELPERS[name].function(series, **args)
            except SeriesError as exc:
                raise EvaluationError(f"{name}(): {exc}") from None
    raise AssertionError(f"unknown node {node!r}")


def _compare(node: Compare, data: Mapping[str, Mapping[str, float]], trace: _Trace) -> bool:
    """Chained like Python (each operand evaluated once, stop at the first false link), noting the subject value."""
    subject = next((i for i, o in enumerate(node.operands) if not _is_literal(o)), 0)

    def operand(i: int) -> Any:
        value = _evaluate(node.operands[i], data, trace)
        if i == subject:
            trace.subjects.append(_as_float(value))
        return value

    left = operand(0)
    for i, op in enumerate(node.ops, start=1):
        right = operand(i)
        if not _COMPARE_FNS[op](left, right):
            trace.false_links.append(f"{format_value(_as_float(left))} {op} {format_value(_as_float(right))}")
            return False
        left = right
    return True


def _as_float(value: int | float) -> float:
    """``float(value)``, with integer literals too large for a float shown as infinities instead of raising."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _is_literal(node: Node) -> bool:
    return isinstance(node, Num) or (isinstance(node, Unary) and isinstance(node.operand, Num))


def _series(data: Mapping[str, Mapping[str, float]], metric: str) -> Mapping[str, float]:
    series = data.get(metric)
    if series is None:
        close = difflib.get_close_matches(metric, list(data), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise MissingDataError(f"no metric {metric!r} in the log{hint}", metric)
    return series
