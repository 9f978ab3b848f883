import json

import pytest

from ppo.metrics.wandb_sink import WandbSink, wandb_run_id


@pytest.mark.slow
def test_offline_sink_records_the_run_and_keeps_its_id_on_resume(tmp_path):
    sink = WandbSink(tmp_path, mode="offline", project="ppo-test", name="run", group="sweep-1",
                     config={"trainer.max_steps": "3"})
    sink.log(1, {"train/reward": 0.5})
    sink.close()
    record = json.loads((tmp_path / "wandb.json").read_text())
    assert record["mode"] == "offline" and record["group"] == "sweep-1" and record["url"] is None
    assert record["id"] == wandb_run_id(tmp_path)
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def test_disabled_sink_writes_nothing(tmp_path):
    sink = WandbSink(tmp_path, mode="disabled", project="p", name="n")
    sink.log(1, {"x": 1.0})
    sink.close()
    assert not (tmp_path / "wandb.json").exists() and not (tmp_path / "wandb").exists()


def test_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="wandb mode"):
        WandbSink(tmp_path, mode="cloud", project="p", name="n")


@pytest.mark.slow
def test_kept_samples_go_to_a_wandb_table(tmp_path):
    rows = [{"split": "validation", "mode": "greedy", "response": "42", "reward": 1.0},
            {"split": "train", "response": "41", "reward": 0.0, "group": 3}]
    sink = WandbSink(tmp_path, mode="offline", project="ppo-test", name="run")
    sink.log_samples(1, rows)
    sink.close()
    (table_file,) = (tmp_path / "wandb").glob("offline-run-*/files/media/table/samples_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["split", "mode", "response", "reward", "group"]
    assert table["data"] == [["validation", "greedy", "42", 1.0, None], ["train", None, "41", 0.0, 3]]
