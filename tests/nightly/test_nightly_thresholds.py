"""Thresholds read off check expressions, and regressions located between nights."""

from __future__ import annotations

import pytest

from ppo.nightly.history import NightRecord
from ppo.nightly.regressions import commits_between, config_diff, explain, find_regressions
from ppo.nightly.thresholds import Threshold, comparisons, evaluate_subject
from tests.nightly.conftest import make_git_repo


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ('data["train/reward"]["40"] > 0.75', [('data["train/reward"]["40"]', [(">", 0.75)])]),
        ('0.79 < min(data["train/probs_ratio_clamped_min"])',
         [('min(data["train/probs_ratio_clamped_min"])', [(">", 0.79)])]),
        ('0 <= data["train/critic/loss"]["40"] < 6', [('data["train/critic/loss"]["40"]', [(">=", 0.0), ("<", 6.0)])]),
        ('max(data["m"]) <= 1 - 0.05', [('max(data["m"])', [("<=", 0.95)])]),
        ('-0.5 < data["m"]["1"]', [('data["m"]["1"]', [(">", -0.5)])]),
        ('0.1 * 2 >= mean(data["m"], -10)', [('mean(data["m"], -10)', [("<=", pytest.approx(0.2))])]),
        ('data["m"]["2"] - data["m"]["0"] >= 0.3', [('data["m"]["2"] - data["m"]["0"]', [(">=", 0.3)])]),
        ('data["a"]["1"] > data["b"]["1"]', [('data["a"]["1"]', [])]),
        ('abs(data["m"]["1"] - 0.6931) < 0.0005', [('abs(data["m"]["1"] - 0.6931)', [("<", 0.0005)])]),
        ('abs(-0.5) < data["m"]["1"]', [('data["m"]["1"]', [(">", 0.5)])]),
        ('data["score"] >= 0.2396', [('data["score"]', [(">=", 0.2396)])]),
        (
            '0.79 < min(data["lo"]) and max(data["hi"]) < 1.29',
            [('min(data["lo"])', [(">", 0.79)]), ('max(data["hi"])', [("<", 1.29)])],
        ),
        (
            '(min(data["a"]) > 0 and min(data["b"]) > 1) and not max(data["c"]) > 2',
            [('min(data["a"])', [(">", 0.0)]), ('min(data["b"])', [(">", 1.0)]), ('not max(data["c"]) > 2', [])],
        ),
        ('min(data["a"]) > 0 or min(data["b"]) > 1', [('min(data["a"]) > 0 or min(data["b"]) > 1', [])]),
    ],
)
def test_subjects_and_thresholds(check, expected):
    got = [(c.subject, [(t.op, t.value) for t in c.thresholds]) for c in comparisons(check)]
    assert got == expected


def test_each_comparison_of_an_and_is_evaluated_on_stored_curves():
    lo, hi = comparisons('0.79 < min(data["lo"]) and max(data["hi"]) < 1.29')
    data = {"lo": {"1": 0.9, "2": 0.85}, "hi": {"1": 1.1, "2": 1.3}}
    assert (evaluate_subject(lo, data), evaluate_subject(hi, data)) == (0.85, 1.3)
    assert evaluate_subject(lo, {"hi": {"1": 1.0}}) is None
    assert Threshold(">=", 0.6).label == ">= 0.6"


def _rec(night: str, status: str, commit: str | None = None, config: str | None = None) -> NightRecord:
    return NightRecord(recipe="r", night=night, status=status, git_commit=commit, config_text=config)


def test_regressions_are_first_fails_after_a_pass_skipping_infra_nights():
    records = [
        _rec("n1", "FAIL"), _rec("n2", "PASS"), _rec("n3", "INFRA-FAIL"), _rec("n4", "FAIL"), _rec("n5", "FAIL"),
        _rec("n6", "PASS"), _rec("n7", "FAIL"),
    ]
    assert [(g.night, b.night) for g, b in find_regressions(records)] == [("n2", "n4"), ("n6", "n7")]


def test_commits_between_two_nights_from_git_log(tmp_path):
    commits = make_git_repo(tmp_path / "repo", ["base", "refactor critic", "change lr"])
    lines, note = commits_between(commits[0], commits[2], tmp_path / "repo")
    assert [line.split(" ", 1)[1] for line in lines] == ["change lr", "refactor critic"] and note == ""
    assert lines[0].split()[0] == commits[2][: len(lines[0].split()[0])]


@pytest.mark.parametrize(
    ("good", "bad", "repo", "note"),
    [
        (None, "b" * 40, "repo", "a record has no git commit"),
        ("a" * 40, "a" * 40, "repo", "same commit on both nights"),
        ("a" * 40, "b" * 40, "repo", "the repository does not have both commits"),
        ("a" * 40, "b" * 40, "not-a-repo", "the repository does not have both commits"),
        ("a" * 40, "b" * 40, None, "no repository given"),
    ],
)
def test_without_the_commits_only_the_hashes_are_shown(tmp_path, good, bad, repo, note):
    make_git_repo(tmp_path / "repo", ["base"])
    (tmp_path / "not-a-repo").mkdir()
    lines, got = commits_between(good, bad, tmp_path / repo if repo else None)
    assert lines == [] and got.startswith(note)


def test_config_diff_between_the_two_records():
    good = _rec("n1", "PASS", config="a = 1\nlr = 2e-05\nz = 3\n")
    bad = _rec("n2", "FAIL", config="a = 1\nlr = 5e-05\nz = 3\n")
    diff, note = config_diff(good, bad)
    assert note == "" and diff[:2] == ["--- n1 (PASS)", "+++ n2 (FAIL)"]
    assert [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-lr = 2e-05", "+lr = 5e-05",
    ]
    assert config_diff(good, good)[1] == "the flattened configs are identical"
    assert config_diff(good, _rec("n2", "FAIL"))[1] == "a record has no flattened config"
    explained = explain(good, bad, None)
    assert explained.commits == [] and explained.config_diff == diff
