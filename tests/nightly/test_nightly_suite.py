"""Suite files and NIGHTLY declarations: everything wrong is caught at load time, with one line naming the entry."""

from __future__ import annotations

import json
import re

import pytest

from ppo.nightly.suite import Nightly, SuiteError, load_suite, read_nightly
from tests.nightly.conftest import REPO, write_experiment
from tests.nightly.stand_in import CHECKS, STEP


def test_python_suite_with_defaults_names_and_overrides(tmp_path, experiment):
    suite = tmp_path / "suite.py"
    suite.write_text(
        "SUITE = [\n"
        f"    {str(experiment)!r},\n"
        f"    {{'experiment': {str(experiment)!r}, 'name': 'short', 'overrides': ['trainer.max_steps=5'],\n"
        "     'step': 5, 'checks': ['max(data[\"train/reward\"]) > 0'], 'timeout_s': 60},\n"
        "]\n"
    )
    first, second = load_suite(suite)
    assert (first.name, first.overrides, first.nightly) == ("exp_fake", (), Nightly(STEP, tuple(CHECKS)))
    assert second.name == "short" and second.overrides == ("trainer.max_steps=5",)
    assert second.nightly == Nightly(5, ('max(data["train/reward"]) > 0',)) and second.timeout_s == 60.0


def test_json_suite_and_partial_nightly_override(tmp_path, experiment):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"suite": [{"experiment": str(experiment), "step": 7}]}))
    (entry,) = load_suite(suite)
    assert entry.nightly == Nightly(7, tuple(CHECKS))


def test_experiment_is_not_imported_when_the_entry_gives_step_and_checks(tmp_path):
    exploding = tmp_path / "exploding.py"
    exploding.write_text("raise RuntimeError('imported')\n")
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([{"experiment": str(exploding), "step": 1, "checks": ["min(data[\"m\"]) > 0"]}]))
    assert load_suite(suite)[0].nightly.step == 1


def test_nightly_is_read_by_importing_the_experiment(tmp_path):
    exp = tmp_path / "computed.py"
    exp.write_text("STEP = 3 * 10\nNIGHTLY = {'step': STEP, 'checks': [f'data[\"m\"][\"{STEP}\"] > 0']}\n")
    assert read_nightly(exp) == Nightly(30, ('data["m"]["30"] > 0',))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"experimnt": "x.py"}, "unknown key 'experimnt' (did you mean 'experiment'?)"),
        ({"name": "x"}, "no 'experiment'"),
        ({"experiment": "{missing}"}, "no such experiment file"),
        ({"experiment": "{exp}", "overrides": "a=1"}, "'overrides' must be a list"),
        ({"experiment": "{exp}", "overrides": ["noequals"]}, "'overrides' must be a list"),
        ({"experiment": "{exp}", "timeout_s": 0}, "'timeout_s' must be a positive number"),
        ({"experiment": "{exp}", "name": "../escape"}, "recipe name '../escape'"),
        ({"experiment": "{exp}", "checks": ["__import__('os')"]}, "check 1: a call to '__import__' is not allowed"),
        ({"experiment": "{exp}", "step": -1}, "step must be a non-negative integer"),
        ({"experiment": "{bare}"}, "declares no NIGHTLY"),
        ({"experiment": "{broken}"}, "cannot load"),
    ],
)
def test_bad_entries_are_refused_with_one_line(tmp_path, experiment, entry, message):
    bare = tmp_path / "bare.py"
    bare.write_text("X = 1\n")
    broken = tmp_path / "broken.py"
    broken.write_text("import does_not_exist_anywhere\n")
    paths = {"exp": experiment, "missing": tmp_path / "missing.py", "bare": bare, "broken": broken}
    entry = {k: (v.format(**paths) if isinstance(v, str) else v) for k, v in entry.items()}
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([entry]))
    with pytest.raises(SuiteError) as info:
        load_suite(suite)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "entry 1" in str(info.value) or "bare.py" in str(info.value) or "broken.py" in str(info.value)


def test_duplicate_names_are_refused(tmp_path, experiment):
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps([str(experiment), {"experiment": str(experiment)}]))
    with pytest.raises(SuiteError, match="entries 1 and 2 are both named 'exp_fake'"):
        load_suite(suite)


def test_a_nightly_check_that_does_not_parse_names_the_experiment(tmp_path):
    exp = write_experiment(tmp_path / "typo.py", checks=['data["m"]["10"] >> 1'])
    with pytest.raises(SuiteError, match=r"typo\.py: check 1: the operator RShift"):
        read_nightly(exp)


@pytest.mark.parametrize(("name", "content", "message"), [
    ("suite.yaml", "- a", "a suite file is .py"),
    ("suite.py", "X = 1", "defines no SUITE"),
    ("suite.json", "[]", "non-empty list"),
    ("suite.json", "{", "not valid JSON"),
])
def test_bad_suite_files(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SuiteError, match=message):
        load_suite(path)


def test_the_gpu_suite_runs_each_gpu_recipe_to_its_nightly_step_with_its_gates(monkeypatch):
    monkeypatch.chdir(REPO)  # a suite's experiment paths are relative to the repository root
    entries = load_suite("nightly_suite_gpu.py")
    assert [e.name for e in entries] == ["math_1b", "qwen2p5_1p5b_gsm8k", "dsr1_7b"]
    gates = read_nightly("experiments/math_1b.py").checks
    for entry in entries:
        assert entry.nightly == read_nightly(entry.experiment)
        assert set(gates) <= set(entry.nightly.checks)
        assert entry.overrides == (f"trainer.max_steps={entry.nightly.step}",)
        assert entry.timeout_s and not entry.launch_args
    # the schedule in docs/nightly.md runs every entry, each once, and only through SLURM
    scheduled = [line for line in (REPO / "docs" / "nightly.md").read_text().splitlines()
                 if line.startswith("0 1 * * ") and "nightly_suite_gpu.py" in line]
    assert scheduled and all("--executor slurm" in line for line in scheduled)
    only = [re.findall(r"--only ([\w.-]+)", line) for line in scheduled]
    assert sorted(name for names in only for name in names) == sorted(2 * [e.name for e in entries])  # scrontab, cron
