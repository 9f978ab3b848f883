"""Environments: math answer extraction and verification, and the math environment that scores rollouts.

  ppo.envs.math       extract_answer, verify: the grading rules (contract used across the project)
  ppo.envs.math_env   MathEnvironment: batch scoring in worker processes with per-item timeouts, pass@k metrics

``MathEnvironment`` is imported from its module (``from ppo.envs.math_env import MathEnvironment``): this package
re-exports only the torch-free grading rules, which the scoring worker processes import.
"""

from __future__ import annotations

from ppo.envs.math import extract_answer, verify

__all__ = ["extract_answer", "verify"]
