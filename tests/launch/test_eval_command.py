"""``launch.py eval``'s pieces that need no engine: which problems it reads and the per-problem table (the command
end to end: ``tests/trainer/test_functional_gates.py``; bad inputs: ``tests/launch/bad_inputs.py``)."""

import pytest

from ppo.config.errors import ConfigError
from ppo.data.records import Record
from ppo.data.tasks import ArithmeticTaskSpec, DAPOMathTaskSpec, GSM8KTaskSpec
from ppo.launch.eval_command import problem_table, with_dataset


def test_a_generated_task_takes_no_dataset():
    with pytest.raises(ConfigError, match="ArithmeticTaskSpec\\) generates its problems and reads no file"):
        with_dataset(ArithmeticTaskSpec(), "problems.jsonl")


def test_a_dataset_replaces_the_held_out_file_whole(tmp_path):
    data = tmp_path / "test.jsonl"
    data.write_text("")
    gsm8k = with_dataset(GSM8KTaskSpec(train_path="train.jsonl", test_path="old.jsonl", val_size=128), str(data))
    assert gsm8k.test_path == str(data) and gsm8k.val_size > 10**6
    dapo = with_dataset(DAPOMathTaskSpec(train_path="t.parquet", val_path="v.parquet", val_size=5), str(data))
    assert dapo.val_path == str(data) and dapo.val_size is None
    with pytest.raises(ConfigError, match="--dataset missing.jsonl: no such file"):
        with_dataset(GSM8KTaskSpec(), "missing.jsonl")


def test_the_problem_table_has_each_problems_greedy_reward_and_its_samples():
    records = [Record(prompt="p", ground_truth="2", id="a"), Record(prompt="q", ground_truth="4", id="b")]
    rows = [{"record_id": "a", "mode": "greedy", "reward": 1.0}, {"record_id": "b", "mode": "greedy", "reward": 0.0},
            {"record_id": "a", "mode": "sampled", "reward": 1.0}, {"record_id": "a", "mode": "sampled", "reward": 0.0},
            {"record_id": "b", "mode": "sampled", "reward": 0.0}, {"record_id": "b", "mode": "sampled", "reward": 0.0}]
    assert problem_table(records, rows, 2) == [
        {"record_id": "a", "ground_truth": "2", "greedy": 1.0, "avg@2": 0.5, "passed": 1, "pass@2": 1.0},
        {"record_id": "b", "ground_truth": "4", "greedy": 0.0, "avg@2": 0.0, "passed": 0, "pass@2": 0.0}]
