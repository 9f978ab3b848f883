import io
import json
import os
import subprocess
import sys

import fiddle as fdl
import pytest

from ppo.config.errors import ConfigError
from ppo.config.printing import diff
from ppo.config.serialization import from_json
from ppo.launch import cli, rundir, slurm
from ppo.launch.job import load_stored_config
from ppo.metrics import read_records
from tests.launch.conftest import REPO, run_launch


def test_dry_run_prints_config_changes_plan_and_sbatch_and_creates_nothing(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = cli.main([str(toy), "--dry-run", "--fiddler", "on_slurm", "optimizer.lr=5e-7", "tag:Seed=3"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "optimizer.lr = 5e-07  # <- override optimizer.lr=5e-7 (was 2e-05)" in out
    assert "seed = 3  # tag Seed  # <- override tag:Seed=3 (was 0)" in out
    assert "data.seed = 3  # tag Seed  # <- override tag:Seed=3 (was 0)" in out
    assert "executor = Config[SlurmExecutor]  # <- --fiddler on_slurm (was Config[LocalExecutor])" in out
    assert "group       gpus  tensor  pipeline  context" in out and "policy      64    4       1         2" in out
    assert "#SBATCH --nodes=8" in out and "-m submitit.core._submit" in out
    assert list(tmp_path.iterdir()) == []


def test_dry_run_of_a_local_run_has_no_sbatch(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(toy), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "LocalExecutor(nodes=1, gpu_memory_gib=80.0)" in out and "#SBATCH" not in out
    assert list(tmp_path.iterdir()) == []


def test_failed_validation_exits_2_with_one_line_and_leaves_no_run_dir(toy, tmp_path):
    rc, out, err = run_launch(str(toy), "steps=0", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert rc == 2 and out == ""
    assert err == "launch.py: steps must be >= 1, got 0 (set steps=...)\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_local_run_end_to_end(toy, tmp_path):
    rc, out, err = run_launch(str(toy), "steps=4", "optimizer.lr=0.5", "--fiddler", "big_lr", "--name", "e2e",
                              cwd=tmp_path)
    assert rc == 0, err
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("e2e-")
    run_dir = runs[0]
    assert f"run directory: {run_dir}" in out
    records = read_records(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 3] and records[0]["train/lr"] == 0.5
    for name in ("config.json", "config.txt", "overrides.txt", "command.txt", "experiment.py", "git.txt",
                 "versions.json", "launch.json", "wandb_config.json", "job.json", "status.json", "job.log"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "overrides.txt").read_text() == "--fiddler big_lr\n--name e2e\nsteps=4\noptimizer.lr=0.5\n"
    assert "optimizer.lr = 0.5  # <- override optimizer.lr=0.5 (was 2e-05)" in (run_dir / "config.txt").read_text()
    assert "steps=4" in (run_dir / "command.txt").read_text()
    versions = json.loads((run_dir / "versions.json").read_text())
    assert {"python", "torch", "vllm", "megatron-core", "ray", "fiddle", "submitit", "transformers"} <= set(versions)
    assert versions["fiddle"] == "0.3.1"
    git = (run_dir / "git.txt").read_text()
    assert git.startswith("commit ") or git == "not a git checkout\n"
    assert (run_dir / "git.diff").exists() == ("dirty true" in git)
    assert json.loads((run_dir / "status.json").read_text())["state"] == "COMPLETED"
    stored = load_stored_config(run_dir)
    assert isinstance(stored, fdl.Config) and stored.name == "e2e" and stored.optimizer.lr == 0.5
    assert diff(stored, from_json((run_dir / "config.json").read_text())) == []
    assert run_launch("status", str(run_dir))[:2] == (0, f"{run_dir}: local job (pid "
                                                         f"{json.loads((run_dir / 'job.json').read_text())['pid']}) "
                                                         f"COMPLETED\n")
    rc, logs, _ = run_launch("logs", str(run_dir))
    assert rc == 0 and str(run_dir / "job.log") in logs


def _parsed_config_txt(run_dir) -> dict[str, str]:
    """What the trainer used to hand wandb, parsed back from ``config.txt`` and ``overrides.txt``."""
    config = {}
    for line in (run_dir / "config.txt").read_text().splitlines():
        path, sep, value = line.partition(" = ")
        if sep:
            config[path.strip()] = value.split("  # ")[0].strip()
    config["overrides"] = " ".join((run_dir / "overrides.txt").read_text().split())
    return config


@pytest.mark.parametrize("fiddlers,overrides", [([], []), (["big_lr"], ["optimizer.lr=0.5", "tag:Seed=3",
                                                                         "data.path=a  # b"])])
def test_the_run_dir_hands_the_trainer_the_config_as_data(toy, tmp_path, fiddlers, overrides):
    """``wandb_config.json``: the values of ``config.txt`` without their comments, and the overrides on one line (what
    the trainer parsed out of those files before, except that a value holding ``"  # "`` is no longer cut there); the
    trainer reads it as it is."""
    from ppo.launch.prepare import Request, prepare
    from ppo.loop.records import wandb_config

    prepared = prepare(Request(str(toy), overrides, fiddlers, name="data"))
    run_dir = rundir.write_run_dir(prepared, [str(toy), *overrides], tmp_path / "run", rundir.GitState(None, False))
    stored = json.loads((run_dir / rundir.WANDB_CONFIG).read_text())
    parsed = _parsed_config_txt(run_dir)
    if overrides:
        assert parsed["data.path"] == "'a" and stored["data.path"] == "'a  # b'"
        parsed["data.path"] = stored["data.path"]
    assert stored == parsed
    assert stored["name"] == "'data'" and list(stored)[-1] == "overrides"
    if overrides:
        assert stored["optimizer.lr"] == "0.5" and stored["seed"] == stored["data.seed"] == "3"
        assert stored["overrides"] == "--fiddler big_lr --name data optimizer.lr=0.5 tag:Seed=3 data.path=a # b"
    assert wandb_config(run_dir) == stored
    assert wandb_config(tmp_path) == {}


@pytest.mark.slow
def test_a_failing_local_job_exits_1_and_status_says_why(toy, tmp_path):
    run_dir = tmp_path / "failing"
    rc, out, err = run_launch(str(toy), "mode=fail", "--run-dir", str(run_dir), cwd=tmp_path)
    assert rc == 1
    assert err.splitlines()[-1].startswith("launch.py: the job failed (exit 1)")
    assert "RuntimeError: toy failure at step 2" in out
    rc, out, _ = run_launch("status", str(run_dir))
    assert rc == 1 and out.endswith("FAILED: RuntimeError: toy failure at step 2\n")
    assert len(read_records(run_dir / "metrics.jsonl")) == 2


@pytest.mark.slow
def test_a_stopped_local_run_resumes_with_the_job_module(toy, tmp_path):
    run_dir = tmp_path / "resume"
    assert run_launch(str(toy), "--run-dir", str(run_dir), cwd=tmp_path)[0] == 0
    again = subprocess.run([sys.executable, "-m", "ppo.launch.job", str(run_dir)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert len(read_records(run_dir / "metrics.jsonl")) == 6
    assert json.loads((run_dir / "status.json").read_text())["attempt"] == 2


def test_debug_executor_runs_in_process(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert cli.main([str(toy), "--executor", "debug", "--run-dir", "dbg", "steps=2"]) == 0
    assert len(read_records(tmp_path / "dbg" / "metrics.jsonl")) == 2
    assert json.loads((tmp_path / "dbg" / "job.json").read_text()) == {"executor": "debug", "pid": os.getpid()}
    assert cli.main([str(toy), "--executor", "debug", "--run-dir", "dbg2", "mode=fail"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: toy failure at step 2" in err


def test_run_dir_must_be_new_or_empty(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    assert cli.main([str(toy), "--run-dir", "taken"]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err


def _git_repo(path, dirty: bool):
    def git(*args):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)

    path.mkdir()
    git("init", "-q")
    (path / "f.txt").write_text("a\n")
    git("add", "f.txt")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    if dirty:
        (path / "f.txt").write_text("b\n")
    return path


def test_git_state_records_commit_and_diff(tmp_path):
    clean = rundir.git_state(_git_repo(tmp_path / "clean", dirty=False))
    dirty = rundir.git_state(_git_repo(tmp_path / "dirty", dirty=True))
    assert clean.commit and not clean.dirty and clean.diff == ""
    assert dirty.dirty and "-a\n+b" in dirty.diff
    assert rundir.git_state(tmp_path).commit is None


def test_the_slurm_pre_submit_check_takes_plain_arguments(tmp_path, monkeypatch):
    texts = dict(shown_by_dry_run="the script", diff_saved_in="the run directory", subject="S", question="go? ")
    monkeypatch.setattr(rundir, "REPO_ROOT", _git_repo(tmp_path / "dirty", dirty=True))
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="needs sbatch on this machine .* --dry-run shows the script without it"):
        slurm.check_submission(allow_dirty=True, yes=True, **texts)
    monkeypatch.setattr(slurm.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(ConfigError, match=r"uncommitted changes; .* \(the diff is saved in the run directory\)$"):
        slurm.check_submission(allow_dirty=False, yes=True, **texts)
    monkeypatch.setattr("sys.stdin", io.StringIO())
    with pytest.raises(ConfigError, match="^submitting S to SLURM needs confirmation: pass --yes$"):
        slurm.check_submission(allow_dirty=True, yes=False, **texts)
    git = slurm.check_submission(allow_dirty=True, yes=True, **texts)
    assert git.dirty and "-a\n+b" in git.diff
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    for answer, expected in (("y", git.commit), ("no", None)):
        monkeypatch.setattr("builtins.input", lambda question, answer=answer: answer)
        result = slurm.check_submission(allow_dirty=True, yes=False, **texts)
        assert (result and result.commit) == expected


def test_slurm_submission_refuses_a_dirty_tree_and_asks_for_confirmation(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(slurm.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(rundir, "REPO_ROOT", _git_repo(tmp_path / "dirty", dirty=True))
    argv = [str(toy), "--executor", "slurm", "--run-dir", "r"]
    assert cli.main(argv) == 2
    assert "has uncommitted changes; commit them or pass --allow-dirty" in capsys.readouterr().err
    assert cli.main(argv + ["--allow-dirty"]) == 2
    assert "needs confirmation: pass --yes" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_graph_source_is_written(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(toy), "--dry-run", "--graph", "g.dot"]) == 0
    assert (tmp_path / "g.dot").read_text().startswith(("digraph", "graph"))


@pytest.mark.parametrize("command", ["status", "logs", "cancel"])
def test_run_commands_refuse_what_is_not_a_run_dir(command, tmp_path, capsys):
    assert cli.main([command, str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"launch.py: {tmp_path} is not a run directory (no launch.json)\n"


def test_dry_run_does_not_import_torch(toy):
    code = (f"import sys; from ppo.launch.cli import main; rc = main([{str(toy)!r}, '--dry-run', '--fiddler', "
            f"'on_slurm']); heavy = sorted(m for m in ('torch', 'vllm', 'megatron') if m in sys.modules); "
            f"print('heavy', heavy); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("heavy []")
