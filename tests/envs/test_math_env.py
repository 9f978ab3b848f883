"""MathEnvironment scoring and metrics, pass@k against hand computation and brute force, and the timeout pool."""

from __future__ import annotations

from itertools import combinations

import pytest
import torch

from ppo.envs.math_env import MathEnvironment
from ppo.envs.pass_at_k import grouped_pass_at_k, pass_at_k
from ppo.envs.pool import TimeoutPool

from .bounded import call_bounded
from .workload import crash_or_identity, raise_or_identity, sleep_or_crash, slow_identity

PATHOLOGICAL = r"\boxed{10^{10^{10}}}"


@pytest.fixture(scope="module")
def env():
    with MathEnvironment(num_workers=2, timeout=3.0, pass_k=(1, 2, 4, 8)) as environment:
        yield environment


def test_score_rewards_and_metrics(env):
    responses = [
        "3 + 4 = 7\n#### 7",
        r"So the answer is $\boxed{\frac{1}{2}}$.",
        "The answer is 12. Check: 5 + 5 = 10",
        "I am not sure",
        r"\boxed{\sqrt{12}}",
        "#### 8",
    ]
    truths = ["7", "0.5", "12", "3", r"2\sqrt{3}", "9"]
    finished = [True, True, True, False, True, False]
    rewards, metrics = call_bounded(env.score, responses, truths, finished=finished, limit=120)
    assert rewards.dtype == torch.float32 and rewards.shape == (6,)
    assert rewards.tolist() == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert metrics["accuracy"] == pytest.approx(4 / 6)
    assert metrics["answered_fraction"] == pytest.approx(5 / 6)
    assert metrics["finished_fraction"] == pytest.approx(4 / 6)
    assert metrics["response_length/mean"] == pytest.approx(sum(map(len, responses)) / 6)
    assert metrics["response_length/max"] == max(map(len, responses))
    assert metrics["verify_timeouts"] == 0.0
    assert not any(key.startswith("pass@") for key in metrics)


def test_token_lengths_and_optional_metrics(env):
    rewards, metrics = call_bounded(env.score, ["#### 1", "#### 2"], ["1", "1"], response_lengths=[10, 30], limit=60)
    assert rewards.tolist() == [1.0, 0.0]
    assert metrics["response_length/mean"] == 20.0
    assert metrics["response_length/max"] == 30.0
    assert "finished_fraction" not in metrics


def test_pass_at_k_by_hand(env):
    # prompt a: 4 samples, 1 correct; prompt b: 4 samples, none; prompt c: 4 samples, all; prompt d: 2 samples, 1.
    outcome = {"a": [1, 0, 0, 0], "b": [0, 0, 0, 0], "c": [1, 1, 1, 1], "d": [0, 1]}
    responses, truths, groups = [], [], []
    for group, marks in outcome.items():
        for ok in marks:
            responses.append("#### 5" if ok else "#### 6")
            truths.append("5")
            groups.append(group)
    _, metrics = call_bounded(env.score, responses, truths, group_ids=groups, limit=60)
    # pass@1 = mean c/n over all prompts = (1/4 + 0 + 1 + 1/2) / 4
    assert metrics["pass@1"] == pytest.approx((0.25 + 0 + 1 + 0.5) / 4)
    # pass@2 = 1 - C(n-c,2)/C(n,2): a = 1 - 3/6, b = 0, c = 1, d = 1 - 0/1
    assert metrics["pass@2"] == pytest.approx((0.5 + 0 + 1 + 1) / 4)
    # pass@4 over prompts with n >= 4 only: a = 1 - C(3,4)/C(4,4) = 1, b = 0, c = 1
    assert metrics["pass@4"] == pytest.approx(2 / 3)
    assert "pass@8" not in metrics


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_matches_subset_enumeration(n):
    """The closed form equals the fraction of k-subsets of the n samples that contain a pass (its definition)."""
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(combinations(samples, k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)


def test_pass_at_k_edge_cases():
    assert pass_at_k(100, 0, 10) == 0.0
    assert pass_at_k(100, 95, 10) == 1.0
    assert pass_at_k(200, 1, 1) == pytest.approx(1 / 200)
    assert grouped_pass_at_k([True, False], ["x", "y"], 2) is None
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        grouped_pass_at_k([True], [0, 1], 1)


@pytest.mark.slow
def test_timed_out_item_scores_zero_and_pool_is_recycled(env):
    before = env.recycles
    responses = ["#### 1", PATHOLOGICAL, "#### 3", r"\boxed{\sqrt{12}}", "#### 5"]
    truths = ["1", r"\frac{1}{3}", "3", r"2\sqrt{3}", "5"]
    rewards, metrics = call_bounded(env.score, responses, truths, limit=120)
    assert rewards.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0]
    assert metrics["verify_timeouts"] == 1.0
    assert env.recycles == before + 1
    rewards, metrics = call_bounded(env.score, ["#### 2"], ["2"], limit=120)
    assert rewards.tolist() == [1.0] and metrics["verify_timeouts"] == 0.0


def test_empty_batch_and_mismatched_lengths(env):
    rewards, metrics = env.score([], [])
    assert rewards.shape == (0,) and metrics == {}
    with pytest.raises(ValueError):
        env.score(["#### 1"], ["1", "2"])
    with pytest.raises(ValueError):
        env.score(["#### 1"], ["1"], finished=[True, False])


@pytest.mark.slow
def test_pool_times_out_only_the_slow_item():
    with TimeoutPool(2, start_method="spawn") as pool:
        calls = [(0, 0.0), (1, 60.0), (2, 0.0), (3, 0.1), (4, 0.0), (5, 0.0)]
        results, cut_off = call_bounded(pool.map, slow_identity, calls, timeout=1.0, default=-1, limit=120)
        assert results == [0, -1, 2, 3, 4, 5]
        assert cut_off == [False, True, False, False, False, False]
        assert pool.recycles == 1


@pytest.mark.slow
def test_items_sharing_a_chunk_with_a_slow_or_raising_item_keep_their_results():
    """One worker, so items travel several to a chunk: the slow item is charged alone (the items queued behind it in
    its chunk rerun), and an item that raises costs only its own result."""
    with TimeoutPool(1, start_method="spawn") as pool:
        calls = [(i, 60.0 if i == 2 else 0.0) for i in range(10)]
        results, cut_off = call_bounded(pool.map, slow_identity, calls, timeout=1.0, default=-1, limit=120)
        assert results == [0, 1, -1, 3, 4, 5, 6, 7, 8, 9]
        assert cut_off == [i == 2 for i in range(10)]
        results, cut_off = call_bounded(pool.map, raise_or_identity, [(i, i == 4) for i in range(10)], timeout=30.0,
                                        default=-1, limit=120)
        assert results == [0, 1, 2, 3, -1, 5, 6, 7, 8, 9] and not any(cut_off)


@pytest.mark.slow
def test_a_crash_beside_an_innocent_item_blames_only_the_crasher():
    """Item 0 is in flight when item 1 kills its worker: both are suspects, each reruns alone, and once item 1 has
    crashed alone it is cut off and never rerun (a regression: it used to stay a suspect and loop for ever)."""
    with TimeoutPool(2, start_method="forkserver") as pool:
        calls = [(0, False, 1.0), (1, True, 0.0), (2, False, 0.0), (3, False, 0.0)]
        results, cut_off = call_bounded(pool.map, sleep_or_crash, calls, timeout=30.0, default=-1, limit=120)
    assert results == [0, -1, 2, 3]
    assert cut_off == [False, True, False, False]


def test_pool_survives_a_crashing_worker():
    with TimeoutPool(2, start_method="forkserver") as pool:
        calls = [(i, i in (1, 4)) for i in range(6)]
        results, cut_off = call_bounded(pool.map, crash_or_identity, calls, timeout=30.0, default=-1, limit=120)
        assert results == [0, -1, 2, 3, -1, 5]
        assert cut_off == [False, True, False, False, True, False]
        results, _ = call_bounded(pool.map, crash_or_identity, [(7, False)], timeout=30.0, default=-1, limit=120)
        assert results == [7]


def test_an_idle_worker_that_died_does_not_fail_the_next_call():
    """A worker killed between calls (OOM killer, a signal) leaves a broken pool; the next call starts a fresh one
    instead of raising BrokenProcessPool (a regression: a preempted SLURM job's driver died of it)."""
    import os
    import signal

    with TimeoutPool(1, start_method="spawn") as pool:
        results, _ = call_bounded(pool.map, slow_identity, [(1, 0.0)], timeout=30.0, default=-1, limit=120)
        assert results == [1]
        for process in list(pool._executor._processes.values()):
            os.kill(process.pid, signal.SIGKILL)
            process.join(10)
        results, cut_off = call_bounded(pool.map, slow_identity, [(2, 0.0)], timeout=30.0, default=-1, limit=120)
        assert (results, cut_off) == ([2], [False])


@pytest.mark.slow
def test_workers_ignore_the_preemption_signal_meant_for_the_driver():
    """SLURM sends SIGUSR2 to every process of the job; only the driver acts on it."""
    import os
    import signal

    with TimeoutPool(1, start_method="spawn") as pool:
        call_bounded(pool.map, slow_identity, [(1, 0.0)], timeout=30.0, default=-1, limit=120)
        processes = list(pool._executor._processes.values())
        for process in processes:
            os.kill(process.pid, signal.SIGUSR2)
        for process in processes:
            process.join(1)
            assert process.is_alive()
