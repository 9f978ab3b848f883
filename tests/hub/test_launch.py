"""Hub ids through the launcher, offline: a dry run says what is here and what a launch would fetch; a launch (and
``launch.py prepare``) resolves them before anything is created, and the run's config names the local paths; what
cannot be had, or a dataset without a column its loader reads, is one line and exit 2 before launch."""

import contextlib
import io

import fiddle as fdl

from ppo.config.serialization import from_json
from ppo.launch.prepare import Request, prepare
from ppo.launch.report import dry_run_text
from ppo.launch.rundir import write_run_dir
from tests.hub.cache import DAPO_ROWS, parquet_bytes
from tests.hub.conftest import MATH_1B, REPO, cache_aime, cache_dapo_math
from tests.launch.conftest import launch_script

TINY = "model.path=test-org/tiny-qwen"


def run_launch(*argv: str, cwd) -> tuple[int, str, str]:
    """``python launch.py ARGV`` in this process, in ``cwd``: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = launch_script().main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_a_dry_run_resolves_a_cached_id_to_its_snapshot_and_fetches_nothing(cached_model_folder, caches):
    prepared = prepare(Request(MATH_1B, [TINY], dry_run=True))
    assert prepared.hub_inputs == [
        f"model.path = test-org/tiny-qwen: here, {cached_model_folder}",
        "task.train_path = BytedTsinghua-SIA/DAPO-Math-17k:train: not here, and HF_HUB_OFFLINE is set: a launch "
        "from this host stops",
        "task.val_path = BytedTsinghua-SIA/AIME-2024:train: not here, and HF_HUB_OFFLINE is set: a launch from this "
        "host stops"]
    assert prepared.experiment.model.hf_config()[1] == "config.json"  # the cached file, not the recipe's copy
    assert prepared.cfg.model.path == "test-org/tiny-qwen"  # a dry run shows the config as given
    text = dry_run_text(prepared, REPO / "runs" / "x", None)
    assert "\n== hub models and datasets (a launch fetches what is not here" in text
    assert not caches.data.exists()


def test_a_dry_run_where_nothing_is_cached_says_what_a_launch_would_fetch(caches, monkeypatch):
    """Online (HF_HUB_OFFLINE unset) a dry run still uses no network; the recipe's HF_CONFIGS give the model's shape."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    prepared = prepare(Request(MATH_1B, [], dry_run=True))
    assert prepared.hub_inputs == [
        f"model.path = Qwen/Qwen2.5-1.5B: not here; a launch fetches it into the HF cache ({caches.hub})",
        f"task.train_path = BytedTsinghua-SIA/DAPO-Math-17k:train: not here; a launch fetches it into PPO_DATA_ROOT "
        f"({caches.data})",
        f"task.val_path = BytedTsinghua-SIA/AIME-2024:train: not here; a launch fetches it into PPO_DATA_ROOT "
        f"({caches.data})"]
    assert prepared.experiment.model.hf_config()[1] == "the recipe"
    assert prepared.experiment.memory_plan() is not None
    assert prepared.missing_paths == []
    assert not caches.hub.exists() and not caches.data.exists()


def test_a_launch_stores_the_local_paths_it_resolved(cached_model_folder, cached_math_data, caches, tmp_path):
    prepared = prepare(Request(MATH_1B, [TINY], dry_run=False))
    train = caches.data / "BytedTsinghua-SIA/DAPO-Math-17k/default/train.parquet"
    val = caches.data / "BytedTsinghua-SIA/AIME-2024/default/train.parquet"
    assert (prepared.cfg.model.path, prepared.cfg.task.train_path, prepared.cfg.task.val_path) == (
        str(cached_model_folder), str(train), str(val))
    assert prepared.edits.marks()["model.path"] == "fetched test-org/tiny-qwen (was 'Qwen/Qwen2.5-1.5B')"
    run_dir = write_run_dir(prepared, ["launch.py", MATH_1B, TINY], tmp_path / "run")
    stored = fdl.build(from_json((run_dir / "config.json").read_text()))
    assert (stored.model.path, stored.task.train_path) == (str(cached_model_folder), str(train))
    assert "# <- fetched BytedTsinghua-SIA/AIME-2024:train (was " in (run_dir / "config.txt").read_text()
    assert len(stored.task.train_records()) == len(DAPO_ROWS)


def test_an_unknown_id_is_refused_in_one_line_before_anything_is_created(caches, tmp_path):
    run_dir = tmp_path / "run"
    for args in (["--executor", "slurm", "--yes", "--allow-dirty", "--run-dir", str(run_dir)],
                 ["--executor", "local", "--dry-run"]):
        rc, out, err = run_launch(MATH_1B, "model.path=nobody/nothing@v1", *args, cwd=tmp_path)
        assert (rc, out) == (2, ""), (rc, out, err)
        assert err == (f"launch.py: model.path: nobody/nothing@v1 is not in the HF cache ({caches.hub}) and "
                       "HF_HUB_OFFLINE is set: fetch it where the hub can be reached (python launch.py prepare "
                       "FILE), or give a local folder (and 2 more)\n" if "--dry-run" in args else
                       f"launch.py: model.path: nobody/nothing@v1 is not in the HF cache ({caches.hub}) and "
                       "HF_HUB_OFFLINE is set: fetch it where the hub can be reached (python launch.py prepare "
                       "FILE), or give a local folder\n")
    assert list(tmp_path.iterdir()) == [], "no run directory, no runs/, no cache written"


def test_prepare_fetches_once_and_the_second_time_finds_everything_there(cached_model_folder, cached_math_data,
                                                                         caches, tmp_path):
    rc, first, err = run_launch("prepare", MATH_1B, TINY, cwd=tmp_path)
    assert rc == 0, err
    train = caches.data / "BytedTsinghua-SIA/DAPO-Math-17k/default/train.parquet"
    val = caches.data / "BytedTsinghua-SIA/AIME-2024/default/train.parquet"
    assert first.splitlines()[:5] == [
        f"model.path = test-org/tiny-qwen: already there, {cached_model_folder}",
        f"task.train_path = BytedTsinghua-SIA/DAPO-Math-17k:train: fetching into PPO_DATA_ROOT ({caches.data})",
        f"task.train_path = BytedTsinghua-SIA/DAPO-Math-17k:train: fetched, {train}",
        f"task.val_path = BytedTsinghua-SIA/AIME-2024:train: fetching into PPO_DATA_ROOT ({caches.data})",
        f"task.val_path = BytedTsinghua-SIA/AIME-2024:train: fetched, {val}"]
    pinned = f"python launch.py {MATH_1B} {TINY} model.path={cached_model_folder} task.train_path={train} " \
             f"task.val_path={val}"
    assert f"\n  python launch.py {MATH_1B} {TINY}\n" in first and f"\n  {pinned}\n" in first
    stamps = {p: p.stat().st_mtime_ns for p in caches.data.rglob("*")}
    rc, second, err = run_launch("prepare", MATH_1B, TINY, cwd=tmp_path)
    assert rc == 0, err
    assert second.splitlines()[:3] == [f"model.path = test-org/tiny-qwen: already there, {cached_model_folder}",
                                       f"task.train_path = BytedTsinghua-SIA/DAPO-Math-17k:train: already there, "
                                       f"{train}",
                                       f"task.val_path = BytedTsinghua-SIA/AIME-2024:train: already there, {val}"]
    assert {p: p.stat().st_mtime_ns for p in caches.data.rglob("*")} == stamps
    assert sorted(tmp_path.iterdir()) == sorted([caches.hub, caches.data]), "prepare creates no run directory"


def test_prepare_offline_is_one_line_for_what_is_not_cached(caches, tmp_path):
    rc, out, err = run_launch("prepare", MATH_1B, cwd=tmp_path)
    assert (rc, out) == (2, "")
    assert err == (f"launch.py: model.path: Qwen/Qwen2.5-1.5B is not in the HF cache ({caches.hub}) and "
                   "HF_HUB_OFFLINE is set: fetch it where the hub can be reached (python launch.py prepare FILE), "
                   "or give a local folder\n")


def test_prepare_of_an_experiment_without_hub_ids_does_nothing(caches):
    rc, out, err = run_launch("prepare", "experiments/tiny_cpu.py", cwd=REPO)
    assert (rc, out) == (0, "nothing to fetch: experiments/tiny_cpu.py names no hub model or dataset\n"), err


def test_a_dataset_missing_a_column_is_refused_in_one_line_before_launch(cached_model_folder, caches, tmp_path):
    cache_dapo_math(caches.hub, [{k: v for k, v in row.items() if k != "prompt"} for row in DAPO_ROWS])
    cache_aime(caches.hub)
    rc, out, err = run_launch("prepare", MATH_1B, TINY, cwd=tmp_path)
    train = caches.data / "BytedTsinghua-SIA/DAPO-Math-17k/default/train.parquet"
    assert rc == 2, (out, err)  # after the fetch's progress bars on stderr, the one line:
    assert err.splitlines()[-1] == (f"launch.py: task.train_path: {train} has no column 'prompt' (columns: "
                                    "data_source, ability, extra_info, reward_model)")
    good, local = tmp_path / "dapo.parquet", tmp_path / "aime.parquet"
    good.write_bytes(parquet_bytes(DAPO_ROWS))
    local.write_bytes(parquet_bytes([{"Problem": "1+1?", "Solution": "2"}]))
    rc, out, err = run_launch(MATH_1B, f"task.train_path={good}", f"task.val_path={local}", "--dry-run", cwd=tmp_path)
    assert (rc, out) == (2, "")
    assert err == f"launch.py: task.val_path: {local} has no column 'answer' (columns: Problem, Solution)\n"
