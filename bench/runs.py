"""What the bench scripts that compare whole runs share: a run's results from its metrics, the first step and the
seconds to a held-out accuracy, and a plain-text table."""

from __future__ import annotations

from pathlib import Path


def run_result(run_dir: Path) -> dict:
    """Step times (validation taken out), rewards, validations (step, accuracy, seconds), the warm start's seconds
    and the critic's explained variance (where there is a critic), from the run's metrics."""
    from ppo.metrics import load_metrics

    data = load_metrics(run_dir)
    total, validation = data["timing/train/total_step_time"], data.get("timing/train/validation", {})
    steps = sorted(total, key=int)
    explained = data.get("train/critic/explained_var", {})
    return {
        "step_seconds": [total[s] - validation.get(s, 0.0) for s in steps],
        "rewards": [data["train/reward"][s] for s in steps],
        "validations": [[int(s), accuracy, validation.get(s, 0.0)]
                        for s, accuracy in sorted(data["validation/accuracy"].items(), key=lambda kv: int(kv[0]))],
        "warm_start_seconds": sum(data.get("timing/setup/warm_start", {}).values()),
        "explained_var": [explained[s] for s in sorted(explained, key=int)],
    }


def first_step_at(result: dict, accuracy: float) -> int | None:
    """The first validated step whose held-out accuracy is at least ``accuracy`` (None if none)."""
    return next((step for step, acc, _ in result["validations"] if acc >= accuracy), None)


def seconds_to(result: dict, accuracy: float, warm_start_s: float) -> float | None:
    """Warm start + the RL steps before the first step at ``accuracy`` (validation not included)."""
    reached = first_step_at(result, accuracy)
    return None if reached is None else warm_start_s + sum(result["step_seconds"][:reached])


def fmt(value, pattern: str = "{:.2f}") -> str:
    return "—" if value is None else pattern.format(value)


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(width) if i else cell.ljust(width) for i, (cell, width) in
                        enumerate(zip(row, widths))))
