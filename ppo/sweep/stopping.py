"""Early stopping: which running trials to stop, and why, from their ``metrics.jsonl``.

Three kinds of rule, all optional, checked each time the sweep polls its trials (:func:`judge`):

- **Gates** (``gates=['data["train/reward"]["20"] > 0.1']``): checks in the nightly check language
  (:mod:`ppo.metrics.expressions`).  A gate is judged once the trial has logged past the largest step it reads
  (or has logged that step with every metric the gate reads); false means stop.  A gate that reads no literal step
  (``max(data["train/kl"]) < 5``) is a running invariant, judged at every poll once its metrics exist.
- **Divergence** guards: a non-finite value (NaN, ±inf) of a watched metric (``non_finite``; ``None`` watches
  every metric), or a value outside ``bounds`` (``{"train/token_mult_prob_error": (None, 1.1)}``: ``(low, high)``,
  ``None`` for no limit).
- A **rank rule** at rungs (steps), comparing the sweep's metric (or the rule's own ``metric``) across trials:

  - :class:`SuccessiveHalving` (asynchronous, as in ASHA): when a trial reaches a rung it is compared with every
    trial that has reached that rung by then (finished and stopped ones included); it goes on only if it is among
    the best ``ceil(n / eta)`` of those ``n`` trials (ties go on).  Until ``min_trials`` trials have reached the
    rung every trial goes on.
  - :class:`MedianStopping` (Google Vizier's rule): at a rung, a trial whose running mean of the metric (over the
    steps logged up to the rung) is worse than the median of the other trials' running means at that rung is
    stopped, once at least ``min_trials`` other trials reached the rung.

  "The value at a rung" is the metric at the largest logged step not after the rung (metrics such as validation
  accuracy are logged every few steps).  Each trial is judged once per rung; the verdict is stored in the sweep
  state, so a driver that was away judges the rungs a trial passed meanwhile, in order, when it comes back.

Trials are compared one by one (each seed is a trial).  Nothing here touches processes: :func:`judge` returns
verdicts, and the runner cancels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ppo.config.errors import ConfigError
from ppo.metrics import CheckError, Status, last_step, parse_check, run_checks
from ppo.metrics.expressions import Check

Data = Mapping[str, Mapping[str, float]]
"""One trial's metrics in the reference layout ``{metric: {"step": value}}``."""


@dataclass(frozen=True)
class Divergence:
    non_finite: Sequence[str] | None = None
    bounds: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def check(self) -> None:
        if self.non_finite is not None and (isinstance(self.non_finite, str)
                                            or not all(isinstance(m, str) for m in self.non_finite)):
            raise ConfigError("Divergence.non_finite must be a list of metric names, or None for every metric")
        if not isinstance(self.bounds, Mapping):
            raise ConfigError("Divergence.bounds must be a dict {metric: (low, high)}")
        for name, pair in self.bounds.items():
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                    and all(b is None or isinstance(b, (int, float)) for b in pair)):
                raise ConfigError(f"Divergence.bounds['{name}'] must be (low, high) with numbers or None")

    def reason(self, data: Data) -> str | None:
        """Why the trial diverged, or None."""
        watched = data.keys() if self.non_finite is None else [m for m in self.non_finite if m in data]
        for name in watched:
            for step, value in data[name].items():
                if not math.isfinite(value):
                    return f"diverged: {name} is {value} at step {step}"
        for name, (low, high) in self.bounds.items():
            for step, value in data.get(name, {}).items():
                if low is not None and value < low:
                    return f"diverged: {name} = {value:.6g} at step {step}, below {low}"
                if high is not None and value > high:
                    return f"diverged: {name} = {value:.6g} at step {step}, above {high}"
        return None


def _check_rungs(rule: str, rungs: Sequence[int], min_trials: int) -> None:
    if isinstance(rungs, (str, bytes)) or not isinstance(rungs, Sequence) or not rungs or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in rungs):
        raise ConfigError(f"{rule}.rungs must be a non-empty list of steps (ints >= 0), got {rungs!r}")
    if list(rungs) != sorted(set(rungs)):
        raise ConfigError(f"{rule}.rungs must be increasing, got {list(rungs)}")
    if isinstance(min_trials, bool) or not isinstance(min_trials, int) or min_trials < 1:
        raise ConfigError(f"{rule}.min_trials must be an int >= 1, got {min_trials!r}")


@dataclass(frozen=True)
class SuccessiveHalving:
    rungs: Sequence[int]
    eta: float = 2.0
    min_trials: int = 2
    metric: str | None = None

    def check(self) -> None:
        _check_rungs("SuccessiveHalving", self.rungs, self.min_trials)
        if not isinstance(self.eta, (int, float)) or isinstance(self.eta, bool) or self.eta <= 1:
            raise ConfigError(f"SuccessiveHalving.eta must be > 1, got {self.eta!r}")

    def statistic(self, series: Mapping[str, float], rung: int) -> float | None:
        return value_at(series, rung)

    def keeps(self, mine: float, others: list[float], maximize: bool) -> tuple[bool, str]:
        values = [*others, mine]
        if len(values) < self.min_trials:
            return True, f"{len(values)} trial(s) at the rung, fewer than min_trials={self.min_trials}"
        keep = math.ceil(len(values) / self.eta)
        better = sum(1 for v in others if (v > mine if maximize else v < mine))
        return better < keep, f"rank {better + 1} of {len(values)}, keeping the best {keep}"


@dataclass(frozen=True)
class MedianStopping:
    rungs: Sequence[int]
    min_trials: int = 3
    metric: str | None = None

    def check(self) -> None:
        _check_rungs("MedianStopping", self.rungs, self.min_trials)

    def statistic(self, series: Mapping[str, float], rung: int) -> float | None:
        values = [v for s, v in series.items() if int(s) <= rung]
        return sum(values) / len(values) if values else None

    def keeps(self, mine: float, others: list[float], maximize: bool) -> tuple[bool, str]:
        if len(others) < self.min_trials:
            return True, f"{len(others)} other trial(s) at the rung, fewer than min_trials={self.min_trials}"
        ordered = sorted(others)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        worse = mine < median if maximize else mine > median
        return not worse, f"running mean {mine:.6g} vs median {median:.6g} of {len(others)} other trial(s)"


RankRule = SuccessiveHalving | MedianStopping


@dataclass(frozen=True)
class EarlyStopping:
    gates: Sequence[str] = ()
    divergence: Divergence | None = field(default_factory=Divergence)
    rule: RankRule | None = None

    def check(self) -> None:
        if isinstance(self.gates, str) or not isinstance(self.gates, Sequence):
            raise ConfigError("EarlyStopping.gates must be a list of check expressions")
        for i, gate in enumerate(self.gates):
            try:
                parse_check(gate)
            except CheckError as err:
                raise ConfigError(f"EarlyStopping.gates[{i}]: {err}") from None
        if self.divergence is not None:
            if not isinstance(self.divergence, Divergence):
                raise ConfigError(f"EarlyStopping.divergence must be a Divergence(...), got {self.divergence!r}")
            self.divergence.check()
        if self.rule is not None:
            if not isinstance(self.rule, (SuccessiveHalving, MedianStopping)):
                raise ConfigError(f"EarlyStopping.rule must be SuccessiveHalving(...) or MedianStopping(...), got "
                                  f"{self.rule!r}")
            self.rule.check()


def value_at(series: Mapping[str, float], step: int) -> float | None:
    """The value at the largest logged step not after ``step`` (None when nothing was logged by then)."""
    best = None
    for s, v in series.items():
        if int(s) <= step and (best is None or int(s) > best[0]):
            best = (int(s), v)
    return None if best is None else best[1]


@dataclass
class Verdict:
    stop: bool
    reason: str = ""
    rungs: dict[str, str] = field(default_factory=dict)
    gates: list[int] = field(default_factory=list)


def _judge_gate(check: Check, data: Data, reached: int) -> bool | None:
    """True/False once the gate can be judged, None while it cannot yet."""
    if any(m not in data for m in check.metrics) and not check.points:
        return None
    needed = max((int(p.step) for p in check.points), default=None)
    if needed is not None:
        if reached < needed:
            return None
        complete = all(p.metric in data and p.step in data[p.metric] for p in check.points)
        if reached == needed and not complete:
            return None
    report = run_checks(data, [check])
    if report.verdict is Status.INFRA_FAIL:
        return None
    return report.verdict is Status.PASS


def judge(policy: EarlyStopping, trial: str, data: Data, others: Mapping[str, Data], metric: str, maximize: bool,
          rungs_done: Mapping[str, str], gates_passed: Sequence[int]) -> Verdict:
    """The verdict on one running trial, given every other trial's metrics (``others``, any state).

    ``rungs_done`` and ``gates_passed`` are what earlier polls decided (from the sweep state); the returned verdict
    holds them plus what was decided now.
    """
    verdict = Verdict(False, rungs=dict(rungs_done), gates=list(gates_passed))
    reached = last_step(data)
    if reached is None:
        return verdict
    if policy.divergence is not None:
        reason = policy.divergence.reason(data)
        if reason:
            return Verdict(True, reason, verdict.rungs, verdict.gates)
    for i, gate in enumerate(policy.gates):
        if i in verdict.gates:
            continue
        check = parse_check(gate)
        outcome = _judge_gate(check, data, reached)
        if outcome is False:
            shown = run_checks(data, [check]).results[0]
            detail = f" ({shown.message})" if shown.message else ""
            return Verdict(True, f"gate failed: {gate}{detail}", verdict.rungs, verdict.gates)
        if outcome is True and check.points:
            verdict.gates.append(i)
    rule = policy.rule
    if rule is None:
        return verdict
    name = rule.metric or metric
    for rung in rule.rungs:
        if str(rung) in verdict.rungs or reached < rung:
            continue
        mine = rule.statistic(data.get(name, {}), rung)
        if mine is None or not math.isfinite(mine):
            verdict.rungs[str(rung)] = "kept: no value at the rung"
            continue
        values = [rule.statistic(d.get(name, {}), rung) for t, d in others.items()
                  if t != trial and (last_step(d) or -1) >= rung]
        keep, why = rule.keeps(mine, [v for v in values if v is not None and math.isfinite(v)], maximize)
        verdict.rungs[str(rung)] = ("kept: " if keep else "stopped: ") + why
        if not keep:
            kind = type(rule).__name__
            return Verdict(True, f"{kind} at step {rung}: {name} {why}", verdict.rungs, verdict.gates)
    return verdict
