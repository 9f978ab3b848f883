"""``ppo.atomic``: the one way files that others may be reading are rewritten (run directories, sweep state, the
nightly history and dashboard, the Ray token)."""

import json
import os
import stat

import pytest

from ppo.atomic import file_mode, write_json_atomic, write_text_atomic


def test_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "status.json"
    path.write_text("old")
    write_text_atomic(path, "néw\n")
    assert path.read_text(encoding="utf-8") == "néw\n"
    assert os.listdir(tmp_path) == ["status.json"]


def test_mode_defaults_to_the_umask_and_can_be_private(tmp_path):
    write_text_atomic(tmp_path / "plain", "x")
    write_text_atomic(tmp_path / "token", "secret", mode=0o600)
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == file_mode()
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


def test_json_takes_dumps_options_and_ends_with_a_newline(tmp_path):
    path = tmp_path / "job.json"
    write_json_atomic(path, {"b": 1, "a": [1, 2]}, indent=2, sort_keys=True)
    assert path.read_text() == json.dumps({"a": [1, 2], "b": 1}, indent=2) + "\n"


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "record.json"
    path.write_text("old")
    with pytest.raises(ValueError):
        write_json_atomic(path, {"x": float("nan")}, allow_nan=False)
    with pytest.raises(TypeError):
        write_text_atomic(path, b"not text")  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["record.json"]
