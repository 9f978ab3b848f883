"""Reward functions of your own, for ``Experiment.reward`` (``ppo.envs.reward.RewardFunction``).

A reward function takes the response text and the problem's ground truth and returns a number.  It runs in the math
environment's worker processes, under ``RewardFunction.timeout_s``; one that raises or returns a non-number scores
0.0 for that sample, named in one line of the run's log.

    python launch.py experiments/tiny_cpu.py --fiddler digits_in_place_reward
"""

from __future__ import annotations


def digits_in_place(response: str, ground_truth: str) -> float:
    """Partial credit for an arithmetic answer: the share of the truth's characters that the response's first line
    has at the same place (``"57"`` against ``"58"`` earns 0.5), a full answer with nothing after it 1.0."""
    answer = response.strip().splitlines()[0] if response.strip() else ""
    if not ground_truth:
        return 0.0
    return sum(said == right for said, right in zip(answer, ground_truth)) / max(len(ground_truth), len(answer))
