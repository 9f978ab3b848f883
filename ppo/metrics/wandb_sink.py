"""Mirror of ``metrics.jsonl`` into Weights & Biases: offline by default, online when the user asks for it.

Offline runs land in ``<run_dir>/wandb/`` and can be uploaded later with ``wandb sync <run_dir>/wandb/offline-run-*``.
The wandb run id is derived from the run directory, so a resumed run continues the same wandb run.  A failure of
wandb itself (no network in online mode, a full disk) is reported once and never stops training: ``metrics.jsonl``
is the record of truth.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MODES = ("offline", "online", "disabled")


def wandb_run_id(run_dir: Path) -> str:
    return hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]


class WandbSink:
    def __init__(self, run_dir: Path, *, mode: str, project: str, name: str, group: str | None = None,
                 config: Mapping[str, Any] | None = None):
        if mode not in MODES:
            raise ValueError(f"wandb mode must be one of {MODES}, got {mode!r}")
        self.run = None
        if mode == "disabled":
            return
        os.environ.setdefault("WANDB_SILENT", "true")
        try:
            import wandb

            self.run = wandb.init(project=project, name=name, group=group, config=dict(config or {}),
                                  dir=str(run_dir), mode=mode, id=wandb_run_id(run_dir), resume="allow",
                                  settings=wandb.Settings(console="off", x_disable_stats=True))
        except Exception as err:  # noqa: BLE001 - wandb must never take the run down
            logger.warning("wandb disabled for this run: %s", err)
            print(f"[ppo] wandb disabled for this run: {err}", flush=True)
            return
        record = {"id": self.run.id, "mode": mode, "project": project, "group": group,
                  "url": self.run.get_url() if mode == "online" else None, "dir": str(Path(self.run.dir).parent)}
        (Path(run_dir) / "wandb.json").write_text(json.dumps(record, indent=2) + "\n")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        if self.run is None:
            return
        try:
            self.run.log(dict(metrics), step=step)
        except Exception as err:  # noqa: BLE001 - wandb must never take the run down
            print(f"[ppo] wandb logging stopped: {err}", flush=True)
            self.run = None

    def log_samples(self, step: int, rows: list[dict]) -> None:
        """The step's kept samples (``ppo.metrics.samples``) as a wandb table ``samples``."""
        if self.run is None or not rows:
            return
        try:
            import wandb

            columns = list(dict.fromkeys(key for row in rows for key in row))
            table = wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
            self.run.log({"samples": table}, step=step)
        except Exception as err:  # noqa: BLE001 - wandb must never take the run down
            print(f"[ppo] wandb logging stopped: {err}", flush=True)
            self.run = None

    def close(self) -> None:
        if self.run is not None:
            try:
                self.run.finish()
            finally:
                self.run = None
