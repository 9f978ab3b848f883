"""``tiny_gsm8k_cpu`` finds its data (the sample shipped in the package) from where ``ppo`` lives, not from the
working directory nor from the project machines' ``../shared``, and says in one line which file is missing when it
is not there."""

import subprocess
import sys

import pytest

import ppo.data.gsm8k
from ppo.config.errors import ConfigError
from ppo.data import BUNDLED_GSM8K_DIR
from ppo.launch.prepare import Request, prepare
from tests.experiments.conftest import REPO

RECIPE = REPO / "experiments" / "tiny_gsm8k_cpu.py"


@pytest.mark.slow
def test_dry_run_from_another_directory(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "launch.py"), str(RECIPE), "--dry-run"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"task.train_path = '{BUNDLED_GSM8K_DIR / 'train.jsonl'}'" in result.stdout
    assert f"task.test_path = '{BUNDLED_GSM8K_DIR / 'test.jsonl'}'" in result.stdout
    assert not any(tmp_path.iterdir()), "a dry run writes nothing"


def test_validation_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prepared = prepare(Request(str(RECIPE), dry_run=True))
    assert prepared.missing_paths == []
    prepared.experiment.check()
    assert prepared.experiment.task.train_path == str(BUNDLED_GSM8K_DIR / "train.jsonl")


def test_missing_data_is_one_line_naming_the_file(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    monkeypatch.setattr(ppo.data.gsm8k, "BUNDLED_GSM8K_DIR", missing)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        prepare(Request(str(RECIPE), dry_run=True))
    assert str(err.value) == f"task: GSM8K file not found: {missing / 'train.jsonl'} (and 1 more)"
