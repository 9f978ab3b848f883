"""A reward of your own (``ppo.envs.reward``): named by import path, run in the scoring workers, and a function that
fails scores its sample 0.0 in one line instead of stopping the run."""

import pytest

from ppo.envs.math_env import MathEnvironment
from ppo.envs.reward import RewardFunction, RewardFunctionError, resolve, score_with
from ppo.experiment import Experiment


@pytest.mark.parametrize("name, message", [
    ("tests.envs.toy_rewards", "function must read 'module:name', got 'tests.envs.toy_rewards'"),
    ("tests.envs.no_such_module:length", "cannot import 'tests.envs.no_such_module'"),
    ("tests.envs.toy_rewards:absent", "tests.envs.toy_rewards has no callable 'absent'"),
])
def test_a_name_that_is_not_a_function_is_refused_in_one_line(name, message):
    with pytest.raises(RewardFunctionError, match=message):
        resolve(name)


def test_the_experiment_refuses_a_bad_reward_before_launch():
    from ppo.data.tasks import ArithmeticTaskSpec
    from ppo.models.sources import TinyRandomModel

    experiment = Experiment(name="x", model=TinyRandomModel(), task=ArithmeticTaskSpec(),
                            reward=RewardFunction(function="tests.envs.toy_rewards:absent"))
    with pytest.raises(ValueError, match="^reward: function 'tests.envs.toy_rewards:absent': "):
        experiment.check()


def test_a_failing_call_scores_zero_and_says_why():
    assert score_with("tests.envs.toy_rewards:length", "abc", "1") == (3.0, True, None)
    assert score_with("tests.envs.toy_rewards:fails_on_sevens", "17", "1") == (
        0.0, False, "raised ValueError: no sevens")
    assert score_with("tests.envs.toy_rewards:says_yes", "1", "1") == (0.0, False,
                                                                       "returned 'yes', not a finite number")
    assert score_with("tests.envs.toy_rewards:not_finite", "1", "1") == (0.0, False,
                                                                         "returned nan, not a finite number")


@pytest.mark.slow
def test_the_environment_scores_with_the_function_in_its_workers(capsys):
    reward = RewardFunction(function="tests.envs.toy_rewards:fails_on_sevens", timeout_s=5.0)
    with MathEnvironment(num_workers=1, reward=reward) as env:
        rewards, metrics = env.score(["12", "17", "33", "77"], ["1", "1", "1", "1"])
        assert rewards.tolist() == [1.0, 0.0, 1.0, 0.0]
        assert metrics["reward_errors"] == 2.0 and metrics["accuracy"] == 0.5
        lines = [line for line in capsys.readouterr().out.splitlines() if "reward function" in line]
        assert lines == ["[ppo] reward function tests.envs.toy_rewards:fails_on_sevens on sample 1 raised "
                         "ValueError: no sevens; it scores 0.0 (and 1 more samples)"]
        lengths, _ = MathEnvironment.score(env, ["1"], ["1"])  # the same workers, the same function
        assert lengths.tolist() == [1.0]
