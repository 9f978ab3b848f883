"""Environments: math answer extraction and verification, and the math environment that scores rollouts.

  ppo.envs.math       extract_answer, verify: the grading rules (contract used across the project)
  ppo.envs.math_env   MathEnvironment: batch scoring in worker processes with per-item timeouts, pass@k metrics

``MathEnvironment`` is loaded lazily so that scoring worker processes, which import this package, do not pay for
``torch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppo.envs.math import extract_answer, verify

if TYPE_CHECKING:
    from ppo.envs.math_env import MathEnvironment

__all__ = ["MathEnvironment", "extract_answer", "verify"]


def __getattr__(name: str) -> Any:
    if name == "MathEnvironment":
        from ppo.envs.math_env import MathEnvironment

        return MathEnvironment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
