"""What a run records of each step: its metrics (``metrics.jsonl`` and wandb), its kept samples
(``samples/step_N.jsonl``, at a validated step its first validation answers as a wandb table) and the console line."""

from __future__ import annotations

import json
from pathlib import Path

from ppo.data.batch import Batch
from ppo.envs.answer import extract_answer
from ppo.loop.settings import PPOSettings
from ppo.metrics import MetricsWriter
from ppo.metrics.samples import every_nth, write_samples
from ppo.metrics.wandb_sink import WandbSink

WANDB_SAMPLE_ROWS = 64
"""Validation answers a validated step sends to wandb's ``samples`` table (``samples/step_N.jsonl`` keeps all)."""


def wandb_config(run_dir: Path) -> dict[str, str]:
    """The run's config as data for wandb, as the launcher wrote it (``wandb_config.json``: ``{path: value}`` and
    ``overrides``); empty for a run directory the launcher did not write."""
    path = run_dir / "wandb_config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


class StepRecords:
    """The run's metrics file, its wandb sink, and the samples kept for the current step."""

    def __init__(self, run_dir: Path, settings: PPOSettings, *, prompt_of: dict[str, str]):
        """``prompt_of``: record id -> the problem's text, for the kept training samples."""
        self.run_dir, self.settings, self.prompt_of = run_dir, settings, prompt_of
        self.wandb = WandbSink(run_dir, mode=settings.wandb_mode, project=settings.wandb_project,
                               name=run_dir.name, group=settings.wandb_group, config=wandb_config(run_dir))
        self.metrics = MetricsWriter(run_dir)
        self.sample_rows: list[dict] = []  # the step's kept samples (ppo.metrics.samples), written with its metrics
        self.step_times: list[float] = []  # every step's total, for the ETA

    def keep_training_samples(self, batch: Batch) -> None:
        """``trainer.train_sample_fraction`` of the batch's samples, as text, for the step's samples file."""
        for i in every_nth(len(batch.responses), self.settings.train_sample_fraction):
            response = batch.responses[i]
            self.sample_rows.append({
                "split": "train", "record_id": batch.record_ids[i], "group": int(batch.group_ids[i]),
                "prompt": self.prompt_of.get(batch.record_ids[i]), "response": response,
                "answer": extract_answer(response), "ground_truth": batch.ground_truths[i],
                "reward": float(batch.scores[i]), "shaped_reward": float(batch.rewards[i]),
                "truncated": bool(batch.truncated[i])})

    def keep_validation_samples(self, rows: list[dict]) -> None:
        self.sample_rows += [{"split": "validation", **row} for row in rows]

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """The step's metrics and its kept samples."""
        self.metrics.log(step, metrics)
        self.wandb.log(step, metrics)
        write_samples(self.run_dir, step, self.sample_rows)
        validation = [row for row in self.sample_rows if row["split"] == "validation"]
        if validation:
            # validation steps only, the first rows: wandb's background process spends seconds on a table of
            # hundreds of rows, ~10 % of the default's steps on 2 cores (bench/step_profile.py); the file has them all
            self.wandb.log_samples(step, validation[:WANDB_SAMPLE_ROWS])
        self.sample_rows = []

    def report(self, step: int, m: dict[str, float]) -> None:
        """The console line of step ``step``, with an ETA from the last 20 steps."""
        max_steps = self.settings.max_steps
        parts = [f"step {step}/{max_steps}", f"reward {m['train/reward']:.3f}"]
        if "validation/accuracy" in m:
            parts.append(f"val acc {m['validation/accuracy']:.3f}")
        if "train/kl_to_reference" in m:
            parts.append(f"kl {m['train/kl_to_reference']:.4f}")
        if "train/critic/explained_var" in m:
            parts.append(f"ev {m['train/critic/explained_var']:+.3f}")
        if "train/probs_ratio_clamped_max" in m:
            parts.append(f"clip {m.get('train/clipfrac', 0.0):.3f}")
        parts.append(f"{m['timing/train/total_step_time']:.1f} s/step")
        self.step_times.append(m["timing/train/total_step_time"])
        recent = self.step_times[-20:]
        eta = sum(recent) / len(recent) * (max_steps - step)
        parts.append(f"eta {int(eta // 60)}:{int(eta % 60):02d}")
        print("[ppo] " + " | ".join(parts), flush=True)

    def close(self) -> None:
        self.metrics.close()
        self.wandb.close()
