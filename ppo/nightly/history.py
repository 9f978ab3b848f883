"""The nightly history on disk: one JSON file per recipe per night, and one baseline band per recipe.

Layout of a history directory (``--history DIR`` of ``analysis/nightly.py``, the argument of
``analysis/dashboard.py``)::

    DIR/
      nights/<night>/<recipe>.json            a night record (below)
      nights/<night>/.superseded/<recipe>.<started_at>.json
                                              a record replaced by a rerun of that recipe the same night
      baselines/<recipe>.json                 the recipe's seed band (see ppo.nightly.baseline)

``<night>`` is a label that sorts in time order: by default the UTC date the run started (``2025-06-01``); give
``--night`` for anything else (``2025-06-01b`` for a second run that day). ``<recipe>`` is the suite entry's name
(by default the experiment file's stem). Every file is written to a temporary name and renamed, so a crashed or
concurrent writer never leaves half a record, and recipes of one night can be recorded by separate jobs. A rerun
of a recipe in the same night replaces its record (the dashboard shows each night's final word); the replaced
record is moved under ``.superseded/``, never deleted. Readers ignore names that start with a dot.

A night record (``schema`` 1), one JSON object; every key is always present, ``null`` where unknown::

    {
      "schema": 1,
      "recipe": "tiny_cpu",
      "night": "2025-06-01",
      "started_at": "2025-06-01T02:00:03+00:00",   # UTC, ISO 8601; orders reruns within a night
      "status": "PASS" | "FAIL" | "INFRA-FAIL",
      "reason": "",                                # one line: why INFRA-FAIL (launch exit code and the job's
                                                   # error or the launcher's last stderr line, step not
                                                   # reached, timeout); "" otherwise
      "step_needed": 100,                          # NIGHTLY["step"]: checks run only if the run got there
      "last_step": 100,                            # the largest step in the run's metrics.jsonl
      "checks": [{"check": "<expression>", "status": "PASS", "value": 0.81, "message": ""}, ...],
                                                   # ppo.metrics.CheckReport.to_json()["checks"]; value is a
                                                   # number, a list of numbers (and/or), or null
      "experiment": "experiments/tiny_cpu.py",
      "overrides": ["trainer.max_steps=100"],
      "executor": "local",
      "launch": {"command": [...], "exit_code": 0, "stderr_tail": "..."},   # null for `nightly.py record`
      "git_commit": "<sha>", "git_dirty": false,  # RUN_DIR/launch.json (run: else the checkout's HEAD)
      "config_hash": "<sha256 hex>",               # of RUN_DIR/config.txt, else of RUN_DIR/config.json
      "config_text": "<flattened config>",         # RUN_DIR/config.txt: what the dashboard diffs
      "versions": {"torch": "2.13.0", ...},        # RUN_DIR/versions.json (run: else installed versions)
      "run_dir": "/abs/path/to/run",
      "wandb_url": null,                           # RUN_DIR/wandb.json (null: offline, or no wandb)
      "wall_time_s": 612.4,
      "curves": {"train/reward": {"1": 0.12, "2": 0.15, ...}, ...}
    }

``curves`` copies, from the run's ``metrics.jsonl`` in the reference layout ``{metric: {"<step>": value}}``, the
:data:`KEY_METRICS` and every metric a check reads, so the dashboard needs no run directory. Non-finite values are
spelled as in :mod:`ppo.metrics.encoding` (``"NaN"``), keeping the files strict JSON.

A baseline (``schema`` 1) holds, per metric, columns over the steps::

    {"schema": 1, "recipe": ..., "created_at": ..., "experiment": ..., "overrides": [...], "seeds": [0, 1, 2],
     "runs": [{"seed": 0, "run_dir": ..., "exit_code": 0, "last_step": 100, "used": true, "problem": ""}, ...],
     "git_commit": ..., "config_hash": ...,
     "metrics": {"train/reward": {"step": [1, 2, ...], "mean": [...], "std": [...], "min": [...], "max": [...],
                                  "n": [3, 3, ...]}, ...}}

``std`` is the sample standard deviation (0 where one run has the step); ``n`` counts the runs that logged it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ppo.atomic import write_json_atomic
from ppo.metrics.encoding import encode_float
from ppo.metrics.loader import normalize_reference_layout
from ppo.metrics.reader import MetricsFormatError

log = logging.getLogger(__name__)

SCHEMA = 1
NIGHTS_DIR = "nights"
BASELINES_DIR = "baselines"
SUPERSEDED_DIR = ".superseded"
STATUSES = ("PASS", "FAIL", "INFRA-FAIL")

KEY_METRICS = (
    "train/reward",
    "validation/accuracy",
    "train/critic/loss",
    "train/critic/explained_var",
    "train/kl_penalty",
    "train/token_mult_prob_error",
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


class HistoryError(ValueError):
    """A record or baseline that does not follow the format above, or a name that cannot be a file name."""


def check_name(kind: str, name: str) -> str:
    """``name`` if it can be a night label or recipe name (a plain file name: letters, digits, ``._+-``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".json"):
        raise HistoryError(f"{kind} {name!r} must be letters, digits and ._+- (not starting with one of ._+-)")
    return name


@dataclass
class NightRecord:
    """One recipe's result for one night; see the module docstring for what each field holds."""

    recipe: str
    night: str
    status: str
    started_at: str | None = None
    reason: str = ""
    step_needed: int | None = None
    last_step: int | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    experiment: str | None = None
    overrides: list[str] = field(default_factory=list)
    executor: str | None = None
    launch: dict[str, Any] | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    config_hash: str | None = None
    config_text: str | None = None
    versions: dict[str, str] | None = None
    run_dir: str | None = None
    wandb_url: str | None = None
    wall_time_s: float | None = None
    curves: dict[str, dict[str, float]] = field(default_factory=dict)
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        check_name("recipe", self.recipe)
        check_name("night", self.night)
        if self.status not in STATUSES:
            raise HistoryError(f"status must be one of {', '.join(STATUSES)}, got {self.status!r}")

    @property
    def failing_checks(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("status") != "PASS"]

    def to_json(self) -> dict[str, Any]:
        """The record as documented above (keys in that order, non-finite curve values as strings)."""
        out = asdict(self)
        out["curves"] = {m: {s: encode_float(v) for s, v in series.items()} for m, series in self.curves.items()}
        first = ("schema", "recipe", "night", "started_at", "status")
        return {**{k: out[k] for k in first}, **{k: v for k, v in out.items() if k not in first}}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, source: str = "<record>") -> NightRecord:
        if not isinstance(obj, Mapping):
            raise HistoryError(f"{source}: a record must be a JSON object")
        if obj.get("schema") != SCHEMA:
            raise HistoryError(f"{source}: unknown schema {obj.get('schema')!r} (this reader knows {SCHEMA})")
        known = set(cls.__dataclass_fields__)
        missing = [k for k in ("recipe", "night", "status") if k not in obj]
        if missing:
            raise HistoryError(f"{source}: missing {', '.join(missing)}")
        fields = {k: v for k, v in obj.items() if k in known}
        try:
            fields["curves"] = normalize_reference_layout(obj.get("curves") or {}, source=source)
        except MetricsFormatError as exc:
            raise HistoryError(str(exc)) from None
        try:
            return cls(**fields)
        except (TypeError, HistoryError) as exc:
            raise HistoryError(f"{source}: {exc}") from None


@dataclass
class Baseline:
    """A recipe's per-step band over seeds: ``metrics[name]`` has the columns step, mean, std, min, max, n."""

    recipe: str
    metrics: dict[str, dict[str, list[float]]]
    seeds: list[int] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    created_at: str | None = None
    experiment: str | None = None
    overrides: list[str] = field(default_factory=list)
    git_commit: str | None = None
    config_hash: str | None = None
    schema: int = SCHEMA

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["metrics"] = {
            name: {col: [v if col in ("step", "n") else encode_float(v) for v in values]
                   for col, values in cols.items()}
            for name, cols in self.metrics.items()
        }
        schema = out.pop("schema")
        return {"schema": schema, **out}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, source: str = "<baseline>") -> Baseline:
        if not isinstance(obj, Mapping) or obj.get("schema") != SCHEMA:
            raise HistoryError(f"{source}: not a schema-{SCHEMA} baseline")
        fields = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        metrics = {}
        for name, cols in (obj.get("metrics") or {}).items():
            try:
                metrics[name] = {
                    col: [int(v) if col in ("step", "n") else float(v) for v in values] for col, values in cols.items()
                }
            except (TypeError, ValueError, AttributeError) as exc:
                raise HistoryError(f"{source}: metric {name!r}: {exc}") from None
            lengths = {len(v) for v in metrics[name].values()}
            if len(lengths) > 1 or not {"step", "mean", "std", "min", "max"} <= set(metrics[name]):
                raise HistoryError(f"{source}: metric {name!r} needs equal-length step/mean/std/min/max columns")
        fields["metrics"] = metrics
        try:
            return cls(**fields)
        except TypeError as exc:
            raise HistoryError(f"{source}: {exc}") from None


@dataclass
class History:
    """Everything under a history directory; ``problems`` names the files that could not be read."""

    records: list[NightRecord]
    baselines: dict[str, Baseline]
    problems: list[str]

    @property
    def nights(self) -> list[str]:
        return sorted({r.night for r in self.records})

    @property
    def recipes(self) -> list[str]:
        return sorted({r.recipe for r in self.records} | set(self.baselines))

    def by_recipe(self) -> dict[str, list[NightRecord]]:
        """Each recipe's records in night order."""
        out: dict[str, list[NightRecord]] = {}
        for record in sorted(self.records, key=lambda r: (r.night, r.started_at or "")):
            out.setdefault(record.recipe, []).append(record)
        return out


def record_path(history: str | os.PathLike[str], recipe: str, night: str) -> Path:
    return Path(history) / NIGHTS_DIR / check_name("night", night) / f"{check_name('recipe', recipe)}.json"


def baseline_path(history: str | os.PathLike[str], recipe: str) -> Path:
    return Path(history) / BASELINES_DIR / f"{check_name('recipe', recipe)}.json"


def write_record(history: str | os.PathLike[str], record: NightRecord) -> Path:
    """Write ``record`` as ``nights/<night>/<recipe>.json``, moving a record it replaces under ``.superseded/``."""
    path = record_path(history, record.recipe, record.night)
    if path.exists():
        stamp = _previous_stamp(path)
        keep = path.parent / SUPERSEDED_DIR / f"{record.recipe}.{stamp}.json"
        keep.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, keep)
    _write_json(path, record.to_json())
    return path


def write_baseline(history: str | os.PathLike[str], baseline: Baseline) -> Path:
    path = baseline_path(history, baseline.recipe)
    _write_json(path, baseline.to_json())
    return path


def read_record(path: str | os.PathLike[str]) -> NightRecord:
    return NightRecord.from_json(_read_json(Path(path)), source=str(path))


def load_history(history: str | os.PathLike[str]) -> History:
    """All records and baselines under ``history``; unreadable files are skipped and listed in ``problems``."""
    root = Path(history)
    records: list[NightRecord] = []
    problems: list[str] = []
    for path in sorted((root / NIGHTS_DIR).glob("*/*.json")):
        if path.name.startswith(".") or path.parent.name.startswith("."):
            continue
        try:
            records.append(read_record(path))
        except (OSError, HistoryError) as exc:
            problems.append(f"{path}: {exc}")
            log.warning("skipped %s: %s", path, exc)
    baselines: dict[str, Baseline] = {}
    for path in sorted((root / BASELINES_DIR).glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            baseline = Baseline.from_json(_read_json(path), source=str(path))
        except (OSError, HistoryError) as exc:
            problems.append(f"{path}: {exc}")
            log.warning("skipped %s: %s", path, exc)
            continue
        baselines[baseline.recipe] = baseline
    return History(records, baselines, problems)


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, obj, indent=1, allow_nan=False, ensure_ascii=False)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryError(f"not valid JSON: {exc}") from None


def _previous_stamp(path: Path) -> str:
    try:
        started = json.loads(path.read_text(encoding="utf-8")).get("started_at") or ""
    except (OSError, ValueError, AttributeError):
        started = ""
    stamp = re.sub(r"[^0-9A-Za-z]", "", started) or str(int(path.stat().st_mtime))
    candidate, n = stamp, 1
    while (path.parent / SUPERSEDED_DIR / f"{path.stem}.{candidate}.json").exists():
        n += 1
        candidate = f"{stamp}-{n}"
    return candidate
