"""Each early-stopping rule on synthetic ``metrics.jsonl`` files (the real writer writes them, the real loader reads
them)."""

import math

import pytest

from ppo.config.errors import ConfigError
from ppo.metrics import last_step, load_metrics
from ppo.sweep.stopping import Divergence, EarlyStopping, MedianStopping, SuccessiveHalving, judge, value_at
from tests.sweep.conftest import write_metrics


def curve(tmp_path, name: str, values: dict[int, float], metric: str = "train/reward", **extra) -> dict:
    rows = {step: {metric: v, **{k: f(step) for k, f in extra.items()}} for step, v in values.items()}
    return load_metrics(write_metrics(tmp_path / name, rows))


def run(policy, trial, data, others=None, metric="train/reward", maximize=True, rungs=None, gates=None):
    return judge(policy, trial, data, others or {trial: data}, metric, maximize, rungs or {}, gates or [])


def test_value_at_reads_the_last_logged_step_not_after_the_rung():
    series = {"0": 0.1, "10": 0.3, "20": 0.5}
    assert value_at(series, 15) == 0.3 and value_at(series, 20) == 0.5 and value_at(series, 25) == 0.5
    assert value_at({"5": 1.0}, 4) is None
    assert last_step({"a": {"3": 1.0}, "b": {"7": 2.0}}) == 7 and last_step({}) is None


def test_a_gate_waits_for_its_step_then_stops_a_trial_that_fails_it(tmp_path):
    policy = EarlyStopping(gates=['data["train/reward"]["4"] > 0.3'])
    early = curve(tmp_path, "early", {1: 0.0, 2: 0.1, 3: 0.1})
    assert run(policy, "t", early).stop is False  # step 4 not reached: not judged
    bad = curve(tmp_path, "bad", {1: 0.0, 2: 0.1, 3: 0.1, 4: 0.2, 5: 0.2})
    verdict = run(policy, "t", bad)
    assert verdict.stop and verdict.reason == 'gate failed: data["train/reward"]["4"] > 0.3 (false: 0.2 > 0.3)'
    good = curve(tmp_path, "good", {4: 0.5})
    verdict = run(policy, "t", good)
    assert not verdict.stop and verdict.gates == [0]
    # a gate passed once is not judged again (its value later does not matter)
    assert run(policy, "t", bad, gates=[0]).stop is False


def test_a_gate_on_a_step_logged_in_a_later_record_waits_for_that_record(tmp_path):
    policy = EarlyStopping(gates=['data["validation/accuracy"]["4"] > 0.5'])
    data = curve(tmp_path, "partial", {1: 0.0, 4: 0.1})  # step 4 reached, validation not written yet
    assert run(policy, "t", data).stop is False
    data["validation/accuracy"] = {"4": 0.2}
    assert "gate failed" in run(policy, "t", data).reason


def test_a_gate_without_a_step_is_an_invariant(tmp_path):
    policy = EarlyStopping(gates=['max(data["train/kl"]) < 1'])
    assert run(policy, "t", curve(tmp_path, "no_kl", {1: 0.1})).stop is False  # metric not logged yet
    ok = curve(tmp_path, "ok", {1: 0.1, 2: 0.1}, **{"train/kl": lambda s: 0.1 * s})
    assert run(policy, "t", ok).stop is False
    blown = curve(tmp_path, "blown", {1: 0.1, 2: 0.1, 3: 0.1}, **{"train/kl": lambda s: 0.5 * s})
    assert run(policy, "t", blown).reason.startswith('gate failed: max(data["train/kl"]) < 1')


def test_divergence_nan_and_bounds(tmp_path):
    policy = EarlyStopping(divergence=Divergence(non_finite=["train/loss"],
                                                 bounds={"train/token_mult_prob_error": (None, 1.1)}))
    healthy = curve(tmp_path, "healthy", {1: 0.1, 2: 0.2}, **{"train/loss": lambda s: 1 / s,
                                                                 "train/token_mult_prob_error": lambda s: 1.01})
    assert run(policy, "t", healthy).stop is False
    nan = curve(tmp_path, "nan", {1: 0.1, 2: 0.2, 3: 0.2},
                **{"train/loss": lambda s: math.nan if s >= 2 else 1.0, "train/token_mult_prob_error": lambda s: 1.0})
    assert run(policy, "t", nan).reason == "diverged: train/loss is nan at step 2"
    oob = curve(tmp_path, "oob", {1: 0.1, 2: 0.2}, **{"train/loss": lambda s: 1.0,
                                                        "train/token_mult_prob_error": lambda s: 0.8 + 0.3 * s})
    assert run(policy, "t", oob).reason == "diverged: train/token_mult_prob_error = 1.4 at step 2, above 1.1"
    # by default every metric is watched for NaN and infinities
    inf = curve(tmp_path, "inf", {1: 0.1, 2: math.inf})
    assert run(EarlyStopping(), "t", inf).reason == "diverged: train/reward is inf at step 2"
    low = curve(tmp_path, "low", {1: -3.0})
    stop = run(EarlyStopping(divergence=Divergence(bounds={"train/reward": (-1, None)})), "t", low)
    assert stop.reason == "diverged: train/reward = -3 at step 1, below -1"


def test_successive_halving_keeps_the_best_fraction_at_each_rung(tmp_path):
    rule = SuccessiveHalving(rungs=[4, 8], eta=2, min_trials=3)
    policy = EarlyStopping(rule=rule)
    finals = {"a": 0.9, "b": 0.7, "c": 0.5, "d": 0.3}
    data = {t: curve(tmp_path, t, {s: v * s / 8 for s in range(1, 9)}) for t, v in finals.items()}
    # the first two to reach the rung go on: fewer than min_trials
    assert run(policy, "a", data["a"], {"a": data["a"]}).rungs["4"].startswith("kept: 1 trial(s) at the rung")
    # with all four there, the best ceil(4/2) = 2 go on
    verdicts = {t: run(policy, t, data[t], data) for t in data}
    assert [t for t, v in verdicts.items() if v.stop] == ["c", "d"]
    assert verdicts["c"].reason == "SuccessiveHalving at step 4: train/reward rank 3 of 4, keeping the best 2"
    assert verdicts["b"].rungs == {"4": "kept: rank 2 of 4, keeping the best 2",
                                   "8": "kept: rank 2 of 4, keeping the best 2"}
    # minimising: the order flips
    flipped = {t: judge(policy, t, data[t], data, "train/reward", False, {}, []) for t in data}
    assert [t for t, v in flipped.items() if v.stop] == ["a", "b"]
    # a rung already judged is not judged again
    assert run(policy, "d", data["d"], data, rungs={"4": "kept", "8": "kept"}).stop is False


def test_median_stopping_compares_running_means_with_the_others(tmp_path):
    rule = MedianStopping(rungs=[4], min_trials=3)
    policy = EarlyStopping(rule=rule)
    others = {t: curve(tmp_path, t, {s: v for s in range(1, 6)}) for t, v in {"a": 0.6, "b": 0.5, "c": 0.4}.items()}
    worse = curve(tmp_path, "worse", {1: 0.3, 2: 0.3, 3: 0.6, 4: 0.6})  # running mean 0.45 < median 0.5
    verdict = run(policy, "worse", worse, {**others, "worse": worse})
    assert verdict.stop and verdict.reason == ("MedianStopping at step 4: train/reward running mean 0.45 vs median "
                                               "0.5 of 3 other trial(s)")
    better = curve(tmp_path, "better", {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5})
    assert run(policy, "better", better, {**others, "better": better}).stop is False
    # too few others at the rung: no verdict but "kept"
    alone = run(policy, "worse", worse, {"a": others["a"], "worse": worse})
    assert not alone.stop and alone.rungs["4"].startswith("kept: 1 other trial(s) at the rung")
    # trials that have not reached the rung do not count
    short = {t: curve(tmp_path, f"short-{t}", {1: 0.9}) for t in "xyz"}
    assert run(policy, "worse", worse, {**short, "worse": worse}).stop is False


def test_rule_metric_can_differ_from_the_sweeps(tmp_path):
    policy = EarlyStopping(rule=MedianStopping(rungs=[2], min_trials=1, metric="train/loss"))
    a = curve(tmp_path, "a", {1: 0.0, 2: 0.0}, **{"train/loss": lambda s: 1.0})
    b = curve(tmp_path, "b", {1: 0.0, 2: 0.0}, **{"train/loss": lambda s: 2.0})
    assert not run(policy, "b", b, {"a": a, "b": b}, maximize=True).stop
    assert run(policy, "b", b, {"a": a, "b": b}, maximize=False).stop


@pytest.mark.parametrize("policy, message", [
    (EarlyStopping(gates=["data['x']['1'] >"]), r"EarlyStopping.gates\[0\]: "),
    (EarlyStopping(gates="x > 1"), "gates must be a list"),
    (EarlyStopping(rule=MedianStopping(rungs=[])), "rungs must be a non-empty list"),
    (EarlyStopping(rule=MedianStopping(rungs=[10, 5])), "rungs must be increasing"),
    (EarlyStopping(rule=SuccessiveHalving(rungs=[5], eta=1)), "eta must be > 1"),
    (EarlyStopping(divergence=Divergence(bounds={"m": (1,)})), r"Divergence.bounds\['m'\] must be \(low, high\)"),
    (EarlyStopping(rule="median"), "rule must be SuccessiveHalving"),
])
def test_bad_policies_are_refused(policy, message):
    with pytest.raises(ConfigError, match=message):
        policy.check()
