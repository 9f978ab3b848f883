"""PASS / FAIL / INFRA-FAIL verdicts."""

from __future__ import annotations

import json
import math

import pytest

from ppo.metrics import ExpressionError, Status, format_table, run_checks

DATA = {
    "train/reward": {str(s): s / 16 for s in range(1, 13)},
    "train/loss": {str(s): math.nan if s == 3 else 1.0 for s in range(1, 13)},
    "validation/accuracy": {"5": 0.5, "10": 0.625},
}


@pytest.mark.parametrize(
    ("checks", "step_needed", "statuses", "verdict", "exit_code"),
    [
        (['data["train/reward"]["12"] > 0.7'], None, ["PASS"], "PASS", 0),
        (['data["train/reward"]["12"] > 0.8'], None, ["FAIL"], "FAIL", 1),
        (['data["train/reward"]["40"] > 0.7'], None, ["INFRA-FAIL"], "INFRA-FAIL", 3),
        (['data["train/reward"]["12"] > 0.7'], 12, ["PASS"], "PASS", 0),
        (['data["train/reward"]["12"] > 0.7', 'max(data["train/loss"]) < 2'], 40, ["INFRA-FAIL"] * 2, "INFRA-FAIL", 3),
        (
            ['data["train/reward"]["12"] > 0.7', 'data["train/reward"]["12"] > 0.8', 'data["train/reward"]["13"] > 0'],
            None,
            ["PASS", "FAIL", "INFRA-FAIL"],
            "INFRA-FAIL",
            3,
        ),
        (['data["validation/accuracy"]["11"] > 0.6'], None, ["FAIL"], "FAIL", 1),
        (['data["validation/accuracy"]["12"] > 0.6'], None, ["FAIL"], "FAIL", 1),
        (['data["nope"]["1"] > 0'], None, ["FAIL"], "FAIL", 1),
        (['max(data["train/loss"]) < 2'], None, ["FAIL"], "FAIL", 1),
        (['data["train/reward"]["1"] > 1 or data["train/reward"]["99"] > 0'], None, ["INFRA-FAIL"], "INFRA-FAIL", 3),
        ([], None, [], "PASS", 0),
    ],
)
def test_verdicts(checks, step_needed, statuses, verdict, exit_code):
    report = run_checks(DATA, checks, step_needed=step_needed)
    assert [r.status.value for r in report.results] == statuses
    assert report.verdict.value == verdict
    assert report.exit_code == exit_code
    assert report.last_step == 12


def test_messages_say_why():
    report = run_checks(
        DATA,
        [
            'data["train/reward"]["40"] > 0.75',
            'data["validation/accuracy"]["11"] > 0.6',
            '0.79 < data["train/reward"]["12"] < 0.7',
        ],
    )
    messages = [r.message for r in report.results]
    assert messages[0] == "metric 'train/reward' has no step '40' (the run stopped at step 12)"
    assert messages[1] == "metric 'validation/accuracy' has no step '11' (last step 10)"
    assert messages[2] == "false: 0.79 < 0.75"
    assert run_checks(DATA, ["1 < 2"], step_needed=40).results[0].message == (
        "the run stopped at step 12; the checks need step 40"
    )


def test_an_empty_log_is_an_infrastructure_failure():
    report = run_checks({}, ["mean(data[\"train/reward\"]) > 0"])
    assert report.verdict is Status.INFRA_FAIL
    assert report.results[0].message == "the metrics log has no records"
    assert report.last_step is None


def test_invalid_check_strings_raise():
    with pytest.raises(ExpressionError):
        run_checks(DATA, ["__import__('os')"])


def test_json_summary_is_strict_json():
    report = run_checks(
        DATA, ['max(data["train/loss"]) < 2', 'data["train/reward"]["12"] > 0.7 and data["train/reward"]["1"] < 1']
    )
    summary = report.to_json()
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["checks"][0]["value"] == "NaN"
    assert summary["checks"][1]["value"] == [0.75, 0.0625]
    assert summary["counts"] == {"PASS": 1, "FAIL": 1, "INFRA-FAIL": 0}
    assert (summary["verdict"], summary["exit_code"], summary["last_step"]) == ("FAIL", 1, 12)


def test_table_has_a_row_per_check_and_a_verdict():
    report = run_checks(DATA, ['data["train/reward"]["12"] > 0.7', 'data["train/reward"]["40"] > 0.7'])
    lines = format_table(report).splitlines()
    assert lines[0].split() == ["STATUS", "CHECK", "VALUE", "MESSAGE"]
    assert lines[1].startswith("PASS ") and "0.75" in lines[1]
    assert lines[2].startswith("INFRA-FAIL ") and "N/A" in lines[2]
    assert lines[3] == "verdict: INFRA-FAIL (1 pass, 1 infra-fail; last step 12)"
