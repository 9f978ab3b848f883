"""The history format: records and baselines round-trip, reruns keep the replaced record, bad files are reported."""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from ppo.nightly.baseline import band
from ppo.nightly.history import (
    Baseline,
    HistoryError,
    NightRecord,
    baseline_path,
    load_history,
    read_record,
    record_path,
    write_baseline,
    write_record,
)
from tests.nightly.conftest import record


def test_record_round_trips_through_strict_json_with_nan_curves(tmp_path):
    original = record("tiny_cpu", "2025-06-01", "FAIL", commit="a" * 40, config="x = 1\n",
                      failing={'data["validation/accuracy"]["20"] >= 0.6': 0.41})
    original.curves["train/critic/loss"]["7"] = math.nan
    path = write_record(tmp_path, original)

    assert path == tmp_path / "nights" / "2025-06-01" / "tiny_cpu.json"
    text = path.read_text()
    assert "NaN" in text and json.loads(text)["curves"]["train/critic/loss"]["7"] == "NaN"
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the file"))
    back = read_record(path)
    assert math.isnan(back.curves["train/critic/loss"].pop("7"))
    original.curves["train/critic/loss"].pop("7")
    assert back == original
    assert list(json.loads(text))[:5] == ["schema", "recipe", "night", "started_at", "status"]


def test_every_documented_key_is_present(tmp_path):
    path = write_record(tmp_path, NightRecord(recipe="r", night="2025-06-01", status="INFRA-FAIL"))
    keys = set(json.loads(path.read_text()))
    assert keys == {
        "schema", "recipe", "night", "started_at", "status", "reason", "step_needed", "last_step", "checks",
        "experiment", "overrides", "executor", "launch", "git_commit", "git_dirty", "config_hash", "config_text",
        "versions", "run_dir", "wandb_url", "wall_time_s", "curves",
    }


def test_rerun_same_night_replaces_and_keeps_the_old_record(tmp_path):
    first = record("r", "2025-06-01", "INFRA-FAIL", commit="a" * 40, config="")
    second = record("r", "2025-06-01", "PASS", commit="a" * 40, config="")
    second.started_at = "2025-06-01T05:00:00+00:00"
    write_record(tmp_path, first)
    write_record(tmp_path, second)

    history = load_history(tmp_path)
    assert [(r.night, r.status) for r in history.records] == [("2025-06-01", "PASS")]
    kept = list((tmp_path / "nights" / "2025-06-01" / ".superseded").iterdir())
    assert len(kept) == 1 and read_record(kept[0]).status == "INFRA-FAIL"


def test_files_are_readable_by_others_under_the_usual_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_record(tmp_path, NightRecord(recipe="r", night="2025-06-01", status="PASS"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden", "x.json", "sp ace"])
def test_names_that_are_not_plain_file_names_are_refused(name):
    with pytest.raises(HistoryError):
        NightRecord(recipe=name, night="2025-06-01", status="PASS")
    with pytest.raises(HistoryError):
        record_path("h", "r", name)


def test_unknown_status_is_refused():
    with pytest.raises(HistoryError, match="status must be one of"):
        NightRecord(recipe="r", night="n1", status="OK")


def test_unreadable_files_are_skipped_and_listed(tmp_path):
    write_record(tmp_path, NightRecord(recipe="good", night="2025-06-01", status="PASS"))
    bad_dir = tmp_path / "nights" / "2025-06-02"
    bad_dir.mkdir(parents=True)
    (bad_dir / "truncated.json").write_text('{"schema": 1, "recipe": "trun')
    (bad_dir / "future.json").write_text(json.dumps({"schema": 99, "recipe": "future"}))
    (bad_dir / "badcurve.json").write_text(json.dumps(
        {"schema": 1, "recipe": "badcurve", "night": "2025-06-02", "status": "PASS", "curves": {"m": {"x": 1}}}
    ))

    history = load_history(tmp_path)
    assert [r.recipe for r in history.records] == ["good"]
    assert len(history.problems) == 3
    assert any("truncated.json" in p and "not valid JSON" in p for p in history.problems)
    assert any("future.json" in p and "unknown schema 99" in p for p in history.problems)
    assert any("badcurve.json" in p and "non-integer step key" in p for p in history.problems)


def test_an_empty_or_missing_history_loads_as_empty(tmp_path):
    history = load_history(tmp_path / "absent")
    assert history.records == [] and history.baselines == {} and history.problems == []


def test_by_recipe_orders_nights_then_start_times(tmp_path):
    for night in ["2025-06-03", "2025-06-01", "2025-06-02"]:
        write_record(tmp_path, NightRecord(recipe="r", night=night, status="PASS", started_at=f"{night}T00:00:00"))
    assert [r.night for r in load_history(tmp_path).by_recipe()["r"]] == ["2025-06-01", "2025-06-02", "2025-06-03"]


def test_band_statistics_against_a_hand_computation():
    runs = [
        {"m": {"1": 1.0, "2": 2.0}},
        {"m": {"1": 3.0, "2": 4.0, "3": 7.0}},
        {"m": {"1": 5.0}, "other": {"1": 0.5}},
    ]
    out = band(runs, ["m", "other", "absent"])
    assert set(out) == {"m", "other"}
    m = out["m"]
    assert m["step"] == [1, 2, 3] and m["n"] == [3, 2, 1]
    assert m["mean"] == [3.0, 3.0, 7.0]
    assert m["std"] == pytest.approx([2.0, math.sqrt(2.0), 0.0])
    assert (m["min"], m["max"]) == ([1.0, 2.0, 7.0], [5.0, 4.0, 7.0])
    assert out["other"] == {"step": [1], "mean": [0.5], "std": [0.0], "min": [0.5], "max": [0.5], "n": [1]}


def test_band_with_a_nan_seed_is_nan_at_that_step():
    out = band([{"m": {"1": 1.0, "2": math.nan}}, {"m": {"1": 2.0, "2": 1.0}}], ["m"])["m"]
    assert out["mean"][0] == 1.5 and all(math.isnan(out[c][1]) for c in ("mean", "std", "min", "max"))


def test_baseline_round_trips(tmp_path):
    baseline = Baseline(recipe="r", metrics=band([{"m": {"1": 1.0}}, {"m": {"1": math.inf}}], ["m"]), seeds=[0, 1])
    path = write_baseline(tmp_path, baseline)
    assert path == baseline_path(tmp_path, "r")
    back = load_history(tmp_path).baselines["r"]
    assert back.metrics["m"]["max"] == [math.inf] and back.metrics["m"]["n"] == [2]
    assert math.isnan(back.metrics["m"]["std"][0])
