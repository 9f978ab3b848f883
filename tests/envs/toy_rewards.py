"""Reward functions for tests/envs/test_reward_function.py (imported by name in the scoring workers)."""


def length(response: str, ground_truth: str) -> float:
    return float(len(response))


def fails_on_sevens(response: str, ground_truth: str) -> float:
    if "7" in response:
        raise ValueError("no sevens")
    return 1.0


def says_yes(response: str, ground_truth: str):
    return "yes"


def not_finite(response: str, ground_truth: str) -> float:
    return float("nan")
