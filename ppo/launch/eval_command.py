"""``python launch.py eval RUN_DIR [--step N] [--samples K] [--dataset D]``: a checkpoint step on held-out problems.

The step's policy is exported to a temporary HF folder (:func:`ppo.launch.export_command.export_step`, a layer at a
time), loaded into one vLLM engine in this process with the run's generation settings, and scored by the run's
environment (the math verifier, or the run's own reward function) through :func:`ppo.rollout.validation.validate`, the
function validation uses in the loop: greedy accuracy, and with K sampled answers a problem ``avg@K`` and unbiased
``pass@k``.  The problems are the run's validation set, or ``--dataset``: a local file or a hub dataset id
(``ORG/NAME[@REVISION][:CONFIG]:SPLIT``, fetched into ``PPO_DATA_ROOT`` first) in the run's task's format.

Written into ``<run_dir>/eval/step_N[-<dataset>]/``: ``metrics.json``, ``problems.csv`` (one row a problem: its
greedy reward, and with samples its mean reward, passes and pass@K) and ``samples.jsonl`` (every answer); the
metrics and the weakest problems are printed.  Runs where vLLM runs: a GPU node for the GPU recipes.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import fiddle as fdl

from ppo.atomic import write_text_atomic
from ppo.config.errors import ConfigError
from ppo.launch.export_command import checkpoint_of, export_step
from ppo.launch.job import load_stored_config

DATASET_FIELDS = ("val_path", "test_path")
"""The task field that names its held-out problems (DAPOMathTaskSpec, GSM8KTaskSpec)."""

SHOWN = 10
"""Problems printed (the weakest first); problems.csv has them all."""


def with_dataset(task, dataset: str | None):
    """The run's task, reading its held-out problems from ``dataset`` when given (all of them: no ``val_size``)."""
    if dataset is None:
        return task
    field = next((f for f in DATASET_FIELDS if hasattr(task, f)), None)
    if field is None:
        raise ConfigError(f"--dataset: the run's task ({type(task).__name__}) generates its problems and reads no "
                          f"file; evaluate it on its own validation set (no --dataset)")
    from ppo.data.hub import fetch_dataset, parse_dataset_id
    from ppo.hub import HubError

    hub_id = parse_dataset_id(dataset)
    try:
        path = str(fetch_dataset(hub_id)) if hub_id is not None else dataset
    except HubError as err:
        raise ConfigError(str(err)) from None
    if hub_id is None and not Path(path).is_file():
        raise ConfigError(f"--dataset {dataset}: no such file (a local file or ORG/NAME[@REVISION][:CONFIG]:SPLIT)")
    return dataclasses.replace(task, **{field: path, "val_size": None if field == "val_path" else 10**9})


def eval_step(run_dir: Path, step: int | None = None, samples: int | None = None, dataset: str | None = None,
              stream=None) -> int:
    stream = stream or sys.stdout
    step, _ = checkpoint_of(run_dir, step)
    if samples is not None and samples < 0:
        raise ConfigError(f"--samples must be >= 0 (0: greedy only), got {samples}")
    experiment = fdl.build(load_stored_config(run_dir))
    task = with_dataset(experiment.task, dataset)
    samples = experiment.trainer.val_samples if samples is None else samples
    try:
        records = task.val_records()
    except (OSError, ValueError) as err:
        raise ConfigError(f"the problems to evaluate cannot be read: {err}") from None
    out = run_dir / "eval" / (f"step_{step}" + (f"-{_slug(dataset)}" if dataset else ""))
    with tempfile.TemporaryDirectory(prefix="ppo-eval-") as tmp:
        model = Path(tmp) / "policy"
        export_step(run_dir, model, step, stream=stream)
        metrics, rows = _generate_and_score(experiment, task, records, model, samples, step)
    out.mkdir(parents=True, exist_ok=True)
    problems = problem_table(records, rows, samples)
    write_text_atomic(out / "metrics.json", json.dumps({"step": step, **metrics}, indent=1) + "\n")
    write_text_atomic(out / "samples.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    write_text_atomic(out / "problems.csv", _csv(problems))
    print(_summary(run_dir, step, len(records), samples, metrics, problems, out), file=stream)
    return 0


def _generate_and_score(experiment, task, records, model: Path, samples: int, step: int):
    """The engine and the environment in this process (vLLM and torch imported here only)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # the command prints its own summary
    from transformers import AutoTokenizer

    from ppo.envs.math_env import MathEnvironment
    from ppo.rollout.validation import validate
    from ppo.rollout.vllm_engine import VLLMEngine
    from ppo.seeds import derive_seed

    engine = VLLMEngine(experiment.generation_for(model))
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = task.template().encode_many(records, tokenizer)
    with MathEnvironment(num_workers=experiment.trainer.math_workers, reward=experiment.reward) as env:
        return validate(engine.generate, env, records, prompts, experiment.generation.sampling, samples=samples,
                        seed=derive_seed(experiment.seed, "validation_sampling", step), prefix="eval/")


def problem_table(records, rows: list[dict], samples: int) -> list[dict]:
    """One row a problem, in the records' order: its greedy reward, and with samples their mean reward, how many
    passed (reward ≥ 0.5) and the problem's pass@K."""
    table = {r.id: {"record_id": r.id, "ground_truth": r.ground_truth, "greedy": None} for r in records}
    drawn: dict[str, list[float]] = {}
    for row in rows:
        if row["mode"] == "greedy":
            table[row["record_id"]]["greedy"] = row["reward"]
        else:
            drawn.setdefault(row["record_id"], []).append(row["reward"])
    for record_id, rewards in drawn.items():
        passed = sum(r >= 0.5 for r in rewards)
        table[record_id] |= {f"avg@{samples}": sum(rewards) / len(rewards), "passed": passed,
                             f"pass@{samples}": float(passed > 0)}
    return list(table.values())


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _summary(run_dir: Path, step: int, count: int, samples: int, metrics: dict, problems: list[dict],
             out: Path) -> str:
    lines = [f"{run_dir} at step {step}, {count} problems" + (f", {samples} samples each" if samples else "")]
    lines += [f"  {name[len('eval/'):]:<20} {value:.4f}" for name, value in metrics.items()]
    key = f"avg@{samples}" if samples else "greedy"
    weakest = sorted(problems, key=lambda p: (p.get(key) or 0.0))[:SHOWN]
    lines.append(f"weakest {len(weakest)} of {count} ({key}):")
    lines += [f"  {p['record_id']:<28} {key} {p.get(key) or 0.0:.3f}  truth {p['ground_truth']}" for p in weakest]
    lines.append(f"written: {out}/metrics.json, problems.csv, samples.jsonl")
    return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]
