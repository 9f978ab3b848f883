"""The metrics log on disk: writer, reader, reference layout, loader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ppo.metrics import (
    METRICS_FILENAME,
    MetricsFormatError,
    MetricsWriter,
    last_step,
    load_metrics,
    read_metrics_log,
    read_records,
    to_reference_layout,
)


def _strict_json(line: str):
    """json.loads that refuses the NaN/Infinity tokens, i.e. what jq or a browser would accept."""

    def refuse(token: str):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(line, parse_constant=refuse)


def test_round_trip_with_nonfinite_values_stays_strict_json(tmp_path):
    written = [
        (1, {"train/loss": 0.5, "train/reward": np.float32(0.25)}),
        (2, {"train/loss": math.nan, "train/reward": math.inf}),
        (3, {"train/loss": -math.inf, "train/reward": np.float64(1.0), "train/global_valid_seqs": 64}),
    ]
    with MetricsWriter(tmp_path) as writer:
        for step, metrics in written:
            writer.log(step, metrics)

    lines = (tmp_path / METRICS_FILENAME).read_text().splitlines()
    assert len(lines) == 3
    for line in lines:
        _strict_json(line)

    records = read_records(tmp_path / METRICS_FILENAME)
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[0] == {"step": 1, "train/loss": 0.5, "train/reward": 0.25}
    assert math.isnan(records[1]["train/loss"]) and records[1]["train/reward"] == math.inf
    assert records[2]["train/loss"] == -math.inf
    assert records[2]["train/global_valid_seqs"] == 64.0
    assert all(isinstance(v, float) for r in records for k, v in r.items() if k != "step")


def test_each_line_is_flushed_before_close(tmp_path):
    writer = MetricsWriter(tmp_path, fsync=True)
    writer.log(7, {"a": 1.0})
    assert read_records(writer.path) == [{"step": 7, "a": 1.0}]
    writer.close()
    with pytest.raises(ValueError):
        writer.log(8, {"a": 1.0})


@pytest.mark.parametrize(
    ("step", "metrics", "error"),
    [
        (-1, {"a": 1.0}, ValueError),
        (True, {"a": 1.0}, ValueError),
        (1.0, {"a": 1.0}, ValueError),
        (1, {"step": 1.0}, ValueError),
        (1, {"": 1.0}, ValueError),
        (1, {"a": 1.0, "b": "0.5"}, TypeError),
        (1, {"a": 1.0, "b": [1.0]}, TypeError),
        (1, {"a": 1.0, "b": None}, TypeError),
    ],
)
def test_a_bad_call_writes_nothing(tmp_path, step, metrics, error):
    with MetricsWriter(tmp_path) as writer:
        with pytest.raises(error):
            writer.log(step, metrics)
    assert (tmp_path / METRICS_FILENAME).read_text() == ""


def test_reader_skips_a_truncated_last_line(tmp_path, caplog):
    path = tmp_path / METRICS_FILENAME
    path.write_text('{"step": 1, "a": 1.0}\n{"step": 2, "a": 2.0}\n{"step": 3, "a": 3.')
    assert read_records(path) == [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}]
    assert "truncated last line" in caplog.text


def test_reader_skips_a_zero_filled_tail(tmp_path):
    """What a crash can leave after delayed allocation: NUL bytes where the last block should be."""
    path = tmp_path / METRICS_FILENAME
    path.write_bytes(b'{"step": 1, "a": 1.0}\n\x00\x00\x00\x00')
    assert read_records(path) == [{"step": 1, "a": 1.0}]


@pytest.mark.parametrize(
    "bad_line",
    [
        '{"step": 2, "a": 2.',
        '["step", 2]',
        '{"a": 2.0}',
        '{"step": "2", "a": 2.0}',
        '{"step": 2, "a": "fast"}',
        '{"step": 2, "a": true}',
    ],
)
def test_reader_rejects_a_bad_line_in_the_middle(tmp_path, bad_line):
    path = tmp_path / METRICS_FILENAME
    path.write_text('{"step": 1, "a": 1.0}\n' + bad_line + '\n{"step": 3, "a": 3.0}\n')
    with pytest.raises(MetricsFormatError, match=r"metrics\.jsonl:2: "):
        read_records(path)


def test_reader_accepts_bare_nan_tokens_and_null(tmp_path):
    path = tmp_path / METRICS_FILENAME
    path.write_text('{"step": 1, "a": NaN, "b": -Infinity, "c": null}\n')
    (record,) = read_records(path)
    assert math.isnan(record["a"]) and record["b"] == -math.inf and "c" not in record


def test_resume_appends_cuts_the_partial_line_and_last_record_wins(tmp_path):
    with MetricsWriter(tmp_path) as writer:
        for step in range(1, 6):
            writer.log(step, {"train/loss": float(step)})
        writer.log(5, {"validation/accuracy": 0.5})
    path = tmp_path / METRICS_FILENAME
    with path.open("a") as f:
        f.write('{"step": 6, "train/lo')

    with MetricsWriter(tmp_path) as writer:
        assert not path.read_text().endswith('"train/lo')
        for step in range(4, 8):
            writer.log(step, {"train/loss": 10.0 * step})

    records = read_records(path)
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 5, 4, 5, 6, 7]
    data = read_metrics_log(path)
    assert data["train/loss"] == {"1": 1.0, "2": 2.0, "3": 3.0, "4": 40.0, "5": 50.0, "6": 60.0, "7": 70.0}
    assert data["validation/accuracy"] == {"5": 0.5}


def test_partial_line_without_any_newline_is_cut_entirely(tmp_path):
    path = tmp_path / METRICS_FILENAME
    path.write_text('{"step": 1, "a"')
    with MetricsWriter(tmp_path) as writer:
        writer.log(1, {"a": 1.0})
    assert path.read_text() == '{"step": 1, "a": 1.0}\n'


def test_reference_layout_orders_steps_numerically_with_string_keys():
    records = [{"step": s, "m": float(s)} for s in (10, 2, 9, 1)]
    data = to_reference_layout(records)
    assert list(data["m"]) == ["1", "2", "9", "10"]
    assert data["m"]["10"] == 10.0


def test_loader_accepts_a_run_dir_a_log_and_the_reference_layout(tmp_path):
    with MetricsWriter(tmp_path / "run") as writer:
        writer.log(1, {"train/reward": 0.1})
        writer.log(2, {"train/reward": math.nan})
    expected_keys = {"train/reward": ["1", "2"]}

    from_dir = load_metrics(tmp_path / "run")
    from_log = load_metrics(tmp_path / "run" / METRICS_FILENAME)
    assert {k: list(v) for k, v in from_dir.items()} == expected_keys
    assert {k: list(v) for k, v in from_log.items()} == expected_keys

    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps({"train/reward": {"10": 0.9, "2": "NaN", "040": 0.95, "3": None}}))
    data = load_metrics(reference)
    assert list(data["train/reward"]) == ["2", "10", "40"]
    assert math.isnan(data["train/reward"]["2"]) and data["train/reward"]["40"] == 0.95
    assert last_step(data) == 40

    log_named_json = tmp_path / "log.json"
    log_named_json.write_text('{"step": 3, "a": 1.0}\n')
    assert load_metrics(log_named_json) == {"a": {"3": 1.0}}


def test_a_flat_score_file_reads_as_a_one_step_series(tmp_path):
    scores = tmp_path / "aime-8k-metric.json"
    scores.write_text('{"score": 0.2604, "pass@16": "NaN", "skipped": null}\n')
    data = load_metrics(scores)
    assert data["score"] == {"0": 0.2604} and data["skipped"] == {}
    assert math.isnan(data["pass@16"]["0"])
    assert load_metrics(scores, score_step=240)["score"] == {"240": 0.2604}
    assert last_step(load_metrics(scores, score_step=240)) == 240


def test_loader_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="without a metrics.jsonl"):
        load_metrics(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_metrics(tmp_path / "missing.jsonl")
    bad_step = tmp_path / "bad_step.json"
    bad_step.write_text('{"a": {"last": 1.0}}')
    with pytest.raises(MetricsFormatError, match="non-integer step key 'last'"):
        load_metrics(bad_step)
    bad_value = tmp_path / "bad_value.json"
    bad_value.write_text('{"a": {"1": "high"}}')
    with pytest.raises(MetricsFormatError, match="metric 'a' step '1'"):
        load_metrics(bad_value)
    bad_score = tmp_path / "bad_score.json"
    bad_score.write_text('{"score": true}')
    with pytest.raises(MetricsFormatError, match="metric 'score' step '0': a metric value must be a number"):
        load_metrics(bad_score)
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "a": 1.0}\n')
    with pytest.raises(MetricsFormatError, match="a score step is only for a flat score file"):
        load_metrics(log, score_step=3)


def test_last_step_of_nothing_is_none():
    assert last_step({}) is None
    assert last_step({"a": {}}) is None
    assert last_step({"a": {"3": 1.0}, "b": {"12": 0.0}}) == 12
