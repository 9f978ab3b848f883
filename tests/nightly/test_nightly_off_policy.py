"""The CPU suite's off-policy entry: its checks read the off-policy metrics of a run's log, its record keeps their
curves, and the dashboard shows them (issue 37: "the nightly checks and the dashboard read the new metrics")."""

from __future__ import annotations

from ppo.metrics import MetricsWriter
from ppo.nightly.report import build_dashboard
from ppo.nightly.runner import record_run_dir
from ppo.nightly.suite import load_suite, read_nightly
from tests.nightly.conftest import REPO


def off_policy_run(run_dir, *, staleness: float):
    """A metrics log as ``tiny_cpu.py trainer.max_staleness=1`` writes it: 150 steps, held-out 0.3 → 0.75, the
    first step's batch fresh and every later one ``staleness`` updates old."""
    with MetricsWriter(run_dir) as writer:
        writer.log(0, {"validation/accuracy": 0.3})
        for step in range(1, 151):
            stale = 0.0 if step == 1 else staleness
            writer.log(step, {"train/reward": 0.5, "train/critic/explained_var": 0.4,
                              "train/staleness_mean": stale, "train/staleness_max": stale,
                              "train/kl_behaviour_to_current": 1e-4 * stale,
                              **({"validation/accuracy": 0.75} if step == 150 else {})})


def test_the_cpu_suites_off_policy_entry_checks_the_staleness_and_the_dashboard_shows_it(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    entry = {e.name: e for e in load_suite("nightly_suite.py")}["tiny_cpu_off_policy"]
    default = read_nightly("experiments/tiny_cpu.py")
    assert entry.experiment.name == "tiny_cpu.py" and entry.overrides == ("trainer.max_staleness=1",)
    assert entry.nightly.step == default.step == 150
    assert set(entry.nightly.checks) - set(default.checks) == {'max(data["train/staleness_max"]) == 1'}

    history = tmp_path / "history"
    for night, staleness, status in (("2026-12-07", 1.0, "PASS"), ("2026-12-08", 2.0, "FAIL")):
        run_dir = tmp_path / night
        off_policy_run(run_dir, staleness=staleness)
        record = record_run_dir(run_dir, recipe=entry.name, night=night, nightly=entry.nightly, history=history)
        assert record.status == status, record.checks
        failing = [c["check"] for c in record.checks if c["status"] != "PASS"]
        assert failing == ([] if status == "PASS" else ['max(data["train/staleness_max"]) == 1'])
        assert record.curves["train/staleness_max"]["150"] == staleness
    page = build_dashboard(history, repo=None)
    assert "tiny_cpu_off_policy" in page and "train/staleness_max" in page
