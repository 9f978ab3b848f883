"""Nightly suites (which experiments run each night, with which overrides) and experiments' NIGHTLY checks.

A suite file is either Python, defining ``SUITE``, or JSON holding the same list (or ``{"suite": [...]}``)::

    # nightly/cpu.py
    SUITE = [
        {"experiment": "experiments/tiny_cpu.py", "overrides": ["trainer.max_steps=100"]},
        {"experiment": "experiments/tiny_cpu.py", "name": "tiny_cpu_short",
         "overrides": ["trainer.max_steps=20"], "step": 20,
         "checks": ['max(data["train/token_mult_prob_error"]) < 1.05'], "timeout_s": 1800},
        "experiments/other.py",                       # a bare path: the experiment as it is
    ]

Keys of an entry:

- ``experiment`` (required): the experiment file, relative to the current directory (run nightly from the
  repository root, as ``launch.py``).
- ``name``: the recipe's name in the history, default the file's stem; unique within the suite.
- ``overrides``: ``path=value`` strings handed to ``launch.py`` as they are (e.g. a step cap).
- ``launch_args``: other ``launch.py`` arguments, after the overrides (``["--fiddler", "raw_reward"]``,
  ``["--allow-dirty"]``); ``--executor``, ``--yes`` and ``--run-dir`` are the runner's.
- ``step`` / ``checks``: replace the experiment's ``NIGHTLY["step"]`` / ``NIGHTLY["checks"]``, e.g. for a
  shortened run whose checks must look at an earlier step.
- ``timeout_s``: kill the launch after that many seconds (the night is then INFRA-FAIL).

An experiment declares its checks as ``NIGHTLY = {"step": N, "checks": ["<expression>", ...]}`` (the language of
:mod:`ppo.metrics.expressions`; ``step`` is optional and makes every check INFRA-FAIL unless the run logged step
``N``). It is read by importing the experiment file as a module (experiment files import only fiddle and the
library), and only when the entry does not give both ``step`` and ``checks``.

Everything is checked when the suite is loaded, before anything is launched: unknown keys, duplicate names,
missing files, a missing or malformed ``NIGHTLY``, checks that do not parse. Errors are :class:`SuiteError` with
one line naming the entry.
"""

from __future__ import annotations

import difflib
import importlib.util
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppo.metrics.expressions import ExpressionError, parse_check
from ppo.nightly.history import HistoryError, check_name

ENTRY_KEYS = ("experiment", "name", "overrides", "launch_args", "step", "checks", "timeout_s")
_module_counter = itertools.count()


class SuiteError(ValueError):
    """A suite or an experiment's NIGHTLY that cannot be run; the message is one line."""


@dataclass(frozen=True)
class Nightly:
    step: int | None
    checks: tuple[str, ...]


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    experiment: Path
    overrides: tuple[str, ...]
    nightly: Nightly
    timeout_s: float | None = None
    launch_args: tuple[str, ...] = ()


def load_suite(path: str | Path) -> list[SuiteEntry]:
    """The checked entries of a ``.py`` or ``.json`` suite file."""
    path = Path(path)
    if not path.is_file():
        raise SuiteError(f"no such suite file: {path}")
    if path.suffix == ".py":
        module = _import_file(path, "suite")
        if not hasattr(module, "SUITE"):
            raise SuiteError(f"{path} defines no SUITE list")
        raw = module.SUITE
    elif path.suffix == ".json":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SuiteError(f"{path}: not valid JSON: {exc}") from None
        if isinstance(raw, Mapping) and "suite" in raw:
            raw = raw["suite"]
    else:
        raise SuiteError(f"{path}: a suite file is .py (defining SUITE) or .json")
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)) or not raw:
        raise SuiteError(f"{path}: the suite must be a non-empty list of entries")
    entries = [parse_entry(item, where=f"{path} entry {i}") for i, item in enumerate(raw, start=1)]
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries, start=1):
        if entry.name in seen:
            raise SuiteError(
                f"{path} entries {seen[entry.name]} and {i} are both named {entry.name!r}; give one a 'name'"
            )
        seen[entry.name] = i
    return entries


def parse_entry(item: Any, *, where: str = "entry") -> SuiteEntry:
    if isinstance(item, str):
        item = {"experiment": item}
    if not isinstance(item, Mapping):
        raise SuiteError(f"{where}: an entry is a dict or an experiment path, got {type(item).__name__}")
    unknown = [k for k in item if k not in ENTRY_KEYS]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), ENTRY_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; the keys are {', '.join(ENTRY_KEYS)}"
        raise SuiteError(f"{where}: unknown key {unknown[0]!r}{hint}")
    if "experiment" not in item:
        raise SuiteError(f"{where}: no 'experiment'")
    experiment = Path(item["experiment"])
    if not experiment.is_file():
        raise SuiteError(f"{where}: no such experiment file: {experiment}")
    name = item.get("name", experiment.stem)
    try:
        check_name("recipe name", name)
    except HistoryError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    overrides = item.get("overrides", [])
    if isinstance(overrides, str) or not all(isinstance(o, str) and "=" in o for o in overrides):
        raise SuiteError(f"{where}: 'overrides' must be a list of 'path=value' strings")
    launch_args = item.get("launch_args", [])
    if isinstance(launch_args, str) or not all(isinstance(a, str) for a in launch_args):
        raise SuiteError(f"{where}: 'launch_args' must be a list of strings")
    reserved = [a for a in launch_args if a.split("=", 1)[0] in ("--executor", "--yes", "--run-dir")]
    if reserved:
        raise SuiteError(f"{where}: 'launch_args' cannot set {reserved[0]} (the nightly runner sets it)")
    timeout = item.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise SuiteError(f"{where}: 'timeout_s' must be a positive number of seconds")
    if "step" in item and "checks" in item:
        declared = Nightly(None, ())
    else:
        declared = read_nightly(experiment)
    nightly = check_nightly(
        {"step": item.get("step", declared.step), "checks": item.get("checks", declared.checks)},
        where=f"{where} ({name})",
    )
    return SuiteEntry(
        name, experiment, tuple(overrides), nightly, float(timeout) if timeout is not None else None,
        tuple(launch_args),
    )


def read_nightly(experiment: str | Path) -> Nightly:
    """The ``NIGHTLY`` an experiment file declares, checked."""
    path = Path(experiment)
    module = _import_file(path, "experiment")
    if not hasattr(module, "NIGHTLY"):
        raise SuiteError(f"{path} declares no NIGHTLY = {{'step': N, 'checks': [...]}}")
    return check_nightly(module.NIGHTLY, where=str(path))


def check_nightly(raw: Any, *, where: str) -> Nightly:
    if isinstance(raw, Nightly):
        raw = {"step": raw.step, "checks": raw.checks}
    if not isinstance(raw, Mapping):
        raise SuiteError(f"{where}: NIGHTLY must be a dict {{'step': N, 'checks': [...]}}")
    unknown = [k for k in raw if k not in ("step", "checks")]
    if unknown:
        raise SuiteError(f"{where}: NIGHTLY has the unknown key {unknown[0]!r} (keys: step, checks)")
    step = raw.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise SuiteError(f"{where}: NIGHTLY step must be a non-negative integer, got {step!r}")
    checks = raw.get("checks", ())
    if isinstance(checks, str) or not isinstance(checks, Sequence):
        raise SuiteError(f"{where}: NIGHTLY checks must be a list of expressions")
    for index, check in enumerate(checks, start=1):
        try:
            parse_check(check)
        except ExpressionError as exc:
            raise SuiteError(f"{where}: check {index}: {exc}") from None
    return Nightly(step, tuple(checks))


def _import_file(path: Path, kind: str) -> Any:
    name = f"_ppo_nightly_{kind}_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SuiteError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any error in the user's file becomes one SuiteError
        raise SuiteError(f"cannot load {path}: {type(exc).__name__}: {exc}") from None
    finally:
        sys.modules.pop(name, None)
    return module
