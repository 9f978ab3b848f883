"""A reward of your own instead of the math verifier: an importable function, named in the experiment graph.

``RewardFunction(function="mypackage.rewards:brevity")`` names ``brevity(response: str, ground_truth: str) ->
float``.  It runs where the verifier runs, in the environment's worker processes under ``timeout_s`` (a hung call
scores 0.0 and costs ``timeout_s``, never the step).  A call that raises or returns something that is not a finite
number scores 0.0 and is reported in one line naming the sample (``train/env/reward_errors`` counts them): a bad
reward never loses a run.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass


class RewardFunctionError(ValueError):
    pass


@dataclass
class RewardFunction:
    """``function``: ``"module:name"`` of a callable ``(response, ground_truth) -> float``, importable on every
    node (a module of the checkout, e.g. under ``experiments/``, or of an installed package)."""

    function: str
    timeout_s: float = 10.0

    def check(self) -> None:
        """Refuse, in one line, a name that does not import to a callable (before anything launches)."""
        if self.timeout_s <= 0:
            raise RewardFunctionError(f"timeout_s must be > 0, got {self.timeout_s}")
        resolve(self.function)


def resolve(function: str):
    """The callable that ``"module:name"`` names; :class:`RewardFunctionError` in one line otherwise."""
    module_name, sep, name = function.partition(":")
    if not sep or not module_name or not name:
        raise RewardFunctionError(f"function must read 'module:name', got {function!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise RewardFunctionError(f"function {function!r}: cannot import {module_name!r} ({err})") from None
    target = getattr(module, name, None)
    if not callable(target):
        raise RewardFunctionError(f"function {function!r}: {module_name} has no callable {name!r}")
    return target


_RESOLVED: dict[str, object] = {}
"""Each worker process imports a reward function once."""


def score_with(function: str, response: object, ground_truth: object) -> tuple[float, bool, str | None]:
    """What a worker process runs for one sample: ``(reward, True, None)``, or ``(0.0, False, why)`` when the
    function raised or returned something other than a finite number."""
    try:
        if function not in _RESOLVED:
            _RESOLVED[function] = resolve(function)
        value = _RESOLVED[function](response, ground_truth)
    except Exception as err:  # noqa: BLE001 - the user's function may raise anything; the sample scores 0.0
        return 0.0, False, f"raised {type(err).__name__}: {err}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0, False, f"returned {value!r}, not a finite number"
    return float(value), True, None
