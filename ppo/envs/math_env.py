"""The math environment the trainer calls once per step: verifiable 0/1 rewards for a batch of responses, plus metrics.

Scoring runs in a ``TimeoutPool`` of spawned worker processes, so a response that sends SymPy into a days-long
computation costs its own reward (0.0) and ``timeout`` seconds, never the training step.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence

import torch

from ppo.envs.math import VERIFY_TIMEOUT
from ppo.envs.math_worker import init_worker, score_item
from ppo.envs.pass_at_k import grouped_pass_at_k
from ppo.envs.pool import TimeoutPool
from ppo.envs.reward import RewardFunction, score_with


class MathEnvironment:
    """Scores responses against reference answers with ``ppo.envs.math``'s rules, in worker processes.

    ``num_workers`` defaults to ``min(4, CPUs)``: verification is cheap next to generation, and each worker holds its
    own SymPy import.  ``pass_k`` lists the k for which pass@k is reported when ``group_ids`` are given.  Use it
    as a context manager or call ``close()``; the workers are started on the first ``score``.
    """

    def __init__(
        self,
        *,
        num_workers: int | None = None,
        timeout: float = VERIFY_TIMEOUT,
        pass_k: Sequence[int] = (1, 4, 8, 16),
        start_method: str = "spawn",
        reward: RewardFunction | None = None,
    ) -> None:
        """``reward``: a function of your own (:mod:`ppo.envs.reward`) in place of the math verifier; its
        ``timeout_s`` replaces ``timeout``."""
        if reward is not None:
            timeout = reward.timeout_s
        self.reward = reward
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if any(k < 1 for k in pass_k):
            raise ValueError(f"pass_k values must be >= 1, got {list(pass_k)}")
        self.timeout = timeout
        self.pass_k = tuple(pass_k)
        self._pool = TimeoutPool(
            num_workers or min(4, os.cpu_count() or 1), initializer=init_worker, start_method=start_method
        )

    @property
    def recycles(self) -> int:
        """How many times a timed-out or crashed verification forced the worker pool to be replaced."""
        return self._pool.recycles

    def score(
        self,
        responses: Sequence[str],
        ground_truths: Sequence[str],
        *,
        finished: Sequence[bool] | None = None,
        group_ids: Sequence[Hashable] | None = None,
        response_lengths: Sequence[int] | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Rewards ``[B]`` (float32, 1.0 correct / 0.0 otherwise) and the step's environment metrics.

        ``finished[i]`` says sample i stopped on its own (EOS / stop string) rather than at the length limit;
        ``group_ids[i]`` names its prompt, so samples of one prompt form a pass@k group; ``response_lengths`` are
        token counts, and without them lengths are measured in characters.  Metrics: ``accuracy``,
        ``answered_fraction`` (an answer could be extracted), ``finished_fraction``, ``response_length/mean`` and
        ``/max``, ``verify_timeouts``, and ``pass@k`` for each k that some group has at least k samples for.
        """
        batch = len(responses)
        _check_lengths(batch, ground_truths=ground_truths, finished=finished, group_ids=group_ids,
                       response_lengths=response_lengths)
        if batch == 0:
            return torch.zeros(0), {}
        if self.reward is None:
            calls = [(response, truth) for response, truth in zip(responses, ground_truths)]
            outcomes, cut_off = self._pool.map(score_item, calls, timeout=self.timeout, default=(0.0, False))
            errors = 0
        else:
            outcomes, cut_off, errors = self._score_with_function(responses, ground_truths)
        rewards = torch.tensor([float(reward) for reward, _ in outcomes], dtype=torch.float32)
        lengths = list(response_lengths) if response_lengths is not None else [
            len(r) if isinstance(r, str) else 0 for r in responses
        ]
        metrics: dict[str, float] = {
            "accuracy": float(rewards.mean()),
            "answered_fraction": sum(answered for _, answered in outcomes) / batch,
            "response_length/mean": sum(lengths) / batch,
            "response_length/max": float(max(lengths)),
            "verify_timeouts": float(sum(cut_off)),
        }
        if self.reward is not None:
            metrics["reward_errors"] = float(errors)
        if finished is not None:
            metrics["finished_fraction"] = sum(bool(f) for f in finished) / batch
        if group_ids is not None:
            correct = [reward >= 0.5 for reward in rewards.tolist()]
            for k in self.pass_k:
                value = grouped_pass_at_k(correct, group_ids, k)
                if value is not None:
                    metrics[f"pass@{k}"] = value
        return rewards, metrics

    def _score_with_function(self, responses, ground_truths) -> tuple[list[tuple[float, bool]], list[bool], int]:
        """The reward function's outcomes; a sample whose call failed scores 0.0, named in one line each time the
        step has one (the first, and how many more)."""
        calls = [(self.reward.function, response, truth) for response, truth in zip(responses, ground_truths)]
        results, cut_off = self._pool.map(score_with, calls, timeout=self.timeout, default=(0.0, False, None))
        failed = [(i, why) for i, (_, _, why) in enumerate(results) if why is not None]
        if failed:
            index, why = failed[0]
            more = f" (and {len(failed) - 1} more samples)" if len(failed) > 1 else ""
            print(f"[ppo] reward function {self.reward.function} on sample {index} {why}; it scores 0.0{more}",
                  flush=True)
        return [(reward, ok) for reward, ok, _ in results], cut_off, len(failed)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> MathEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_lengths(batch: int, **fields: Sequence | None) -> None:
    for name, values in fields.items():
        if values is not None and len(values) != batch:
            raise ValueError(f"{name} has {len(values)} entries for {batch} responses")
