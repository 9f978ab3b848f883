"""``launch.py export``'s choice of checkpoint (its errors are in ``bad_inputs.py``; the export itself in
``tests/rollout/test_export_step.py``)."""

from ppo.launch.export_command import checkpoint_of


def test_the_default_step_is_the_latest_complete_checkpoint(tmp_path):
    for record in ("launch.json", "config.json"):
        (tmp_path / record).write_text("{}")
    for step in ("step_000002", "step_000010", "step_000011.partial"):  # 10 after 2, though not as text
        (tmp_path / "checkpoints" / step / "policy").mkdir(parents=True)
    assert checkpoint_of(tmp_path, None) == (10, tmp_path / "checkpoints" / "step_000010")
    assert checkpoint_of(tmp_path, 2) == (2, tmp_path / "checkpoints" / "step_000002")
