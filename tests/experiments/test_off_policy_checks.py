"""``trainer.max_staleness``: what the dry run's check refuses, and the loss an off-policy run trains with."""

import pytest

from ppo.config.errors import ConfigError
from ppo.launch.prepare import Request, prepare
from ppo.loop.off_policy import with_behaviour_correction
from tests.experiments.conftest import REPO


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def prep(recipe: str, *overrides: str, fiddlers: tuple[str, ...] = ()):
    return prepare(Request(f"experiments/{recipe}.py", list(overrides), list(fiddlers), dry_run=True)).experiment


def refusal(recipe: str, *overrides: str) -> str:
    with pytest.raises(ConfigError) as err:
        prep(recipe, *overrides)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_negative_staleness_is_refused():
    refused = refusal("tiny_cpu", "trainer.max_staleness=-1")
    assert "trainer.max_staleness must be >= 0 (0: on-policy), got -1" in refused


def test_generating_while_training_needs_engines_on_gpus_of_their_own():
    assert refusal("dsr1_7b", "trainer.max_staleness=1") == (
        "trainer.max_staleness=1 generates while the policy trains, which needs engines on GPUs of their own: set "
        "colocated=False")
    split = prep("dsr1_7b", fiddlers=("asynchronous",))  # engines on 32 GPUs of their own, the groups on 32
    plan = split.placement_plan()
    assert split.trainer.max_staleness == 1 and not plan.colocated and plan.gpus_used_line() == "GPUs used: 64 of 64"
    engine_gpus = {(s.node, s.gpu) for s in plan.ranks["generation"]}
    training_gpus = {(s.node, s.gpu) for role in ("policy", "critic") for s in plan.ranks[role]}
    assert len(engine_gpus) == 32 and not engine_gpus & training_gpus
    assert split.memory_plan() is not None  # planned per GPU and phase on the split


def test_cpu_ranks_run_off_policy_with_the_default_plan():
    """Every rank a CPU process: nothing is colocated on a GPU, so the embedded default runs off-policy as it is."""
    assert prep("tiny_cpu", "trainer.max_staleness=2").trainer.max_staleness == 2


def test_off_policy_the_loss_corrects_from_the_engines_policy_to_the_proximal_one():
    """tiny_cpu takes logp_old from the engine and names no correction, which on-policy is the same thing; off-policy
    the trainer recomputes logp_old and the loss weighs the behaviour → proximal ratio (``tis`` unless named)."""
    on = prep("tiny_cpu")
    assert with_behaviour_correction(on) is on and on.policy.loss.is_correction is None
    off = with_behaviour_correction(prep("tiny_cpu", "trainer.max_staleness=1"))
    assert off.policy.loss.is_correction == "tis" and off.policy.loss.clip_low == on.policy.loss.clip_low
    named = prep("tiny_cpu", "trainer.max_staleness=1", "policy.loss.is_correction='icepop'")
    assert with_behaviour_correction(named).policy.loss.is_correction == "icepop"
    # on-policy, a correction beside the engine's logp_old is still refused (the two are the same numbers there)
    assert "corrects for the engine's logprobs" in refusal("tiny_cpu", "policy.loss.is_correction='icepop'")


def test_max_staleness_is_a_sweep_axis_each_value_checked_before_anything_exists(tmp_path, capsys):
    """A grid over ``trainer.max_staleness`` on the embedded default: the dry run prepares every trial (the value
    reaches the trainer's settings), and a value the settings refuse is the sweep's one-line refusal."""
    from tests.launch.conftest import launch_script
    from tests.sweep.conftest import write_sweep

    body = ('axes=[Grid({"trainer.max_staleness": [0, 1, 2]})], seeds=[0], metric="validation/accuracy", '
            'step=3, overrides=["trainer.max_steps=3"],')
    sweep = write_sweep(tmp_path / "staleness.py", body, base=REPO / "experiments" / "tiny_cpu.py")
    assert launch_script().main([str(sweep), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "trials:     3 = 3 configuration(s) x 1 seed(s)" in out
    assert "    trainer.max_staleness = 1  (was 0)" in out and "    trainer.max_staleness = 2  (was 0)" in out
    bad = write_sweep(tmp_path / "bad.py", body.replace("[0, 1, 2]", "[0, -1]"),
                      base=REPO / "experiments" / "tiny_cpu.py")
    assert launch_script().main([str(bad), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "trainer.max_staleness must be >= 0 (0: on-policy), got -1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.py", "staleness.py"]
