"""The warm start's result kept across runs: the warm-started policy's weights file and its report, under a key that
hashes everything the result depends on, so that a second run of the same recipe on the same machine loads them
instead of repeating the supervised steps (to the bit: the same weights, a fresh optimizer either way).

Where: ``$PPO_WARM_START_CACHE`` if set (``off`` turns the cache off), else ``$XDG_CACHE_HOME/ppo/warm_start`` (by
default ``~/.cache/ppo/warm_start``).  Each entry is a folder ``<key>/`` holding ``policy.safetensors`` (HF names) and
``report.json``; deleting the folder (or all of them) is always safe.

The key (:func:`warm_start_key`) hashes the initial model's files, the warm start's batches themselves (so the data,
tokenizer, template, batch size, step count and ``trainer.warm_start_seed``), the policy's spec (layout, optimizer,
micro-batching, dtype, threads), the learning rate, the run's seed, the library versions, this CPU, and the source of
every module of the ``ppo`` package as this process found it (a change to any starts afresh).  Only CPU runs of a
float32 policy use it (:func:`cacheable`): a bf16 policy's warm start ends with float32 main parameters that its
weights file does not hold, and a GPU's arithmetic is its model's.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

CACHE_VERSION = 1
"""Bumped when an entry's layout or meaning changes."""

WEIGHTS, REPORT = "policy.safetensors", "report.json"
PACKAGE = Path(__file__).resolve().parents[1]
"""``ppo``: the code the warm start runs through is in it, and its whole source is part of the key."""


def cache_root(environ=os.environ) -> Path | None:
    """Where entries live; None when ``PPO_WARM_START_CACHE=off``."""
    setting = environ.get("PPO_WARM_START_CACHE")
    if setting is not None:
        return None if setting.strip().lower() in ("off", "0", "false", "") else Path(setting).expanduser()
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ppo" / "warm_start"


def cacheable(exp, plan) -> bool:
    """Whether this run's warm start may come from (and go to) the cache: CPU ranks and a float32 policy."""
    return plan.cpu_only and exp.policy.dtype == "float32"


def _hash_files(digest, folder: Path, paths) -> None:
    for path in sorted(paths):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")


@functools.cache
def code_digest() -> str:
    """sha256 of the source of :data:`PACKAGE` (~15 ms), read once a process: the code it runs."""
    digest = hashlib.sha256()
    _hash_files(digest, PACKAGE, PACKAGE.rglob("*.py"))
    return digest.hexdigest()


def model_digest(model_path: Path) -> str:
    """sha256 of every file of the initial model's folder (weights, config, tokenizer)."""
    digest = hashlib.sha256()
    _hash_files(digest, Path(model_path), [p for p in Path(model_path).rglob("*") if p.is_file()])
    return digest.hexdigest()


def batches_digest(batches) -> str:
    """sha256 of the warm start's batches: every field's name, dtype, shape and bytes, in order."""
    import torch

    digest = hashlib.sha256()
    for batch in batches:
        for name, value in sorted(batch.fields().items()):
            digest.update(name.encode() + b"\0")
            if isinstance(value, torch.Tensor):
                value = value.contiguous()
                digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
                digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
            else:
                digest.update(json.dumps(value, default=str).encode())
    return digest.hexdigest()


def machine() -> dict:
    """The libraries and the CPU the warm start's floats depend on."""
    import torch

    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return {"python": platform.python_version(), "machine": platform.machine(), "cpu": cpu,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "megatron-core": version("megatron-core"), "safetensors": version("safetensors")}


def warm_start_inputs(exp, model_path: Path, batches, threads: int) -> dict:
    """Everything the warm start's result depends on (its key is their hash)."""
    return {"version": CACHE_VERSION, "code": code_digest(), "machine": machine(),
            "model": model_digest(model_path), "batches": batches_digest(batches),
            "policy": dataclasses.asdict(exp.policy), "threads": exp.policy.num_threads or threads,
            "lr": exp.trainer.warm_start_lr, "seed": exp.seed}


def warm_start_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:32]


def lookup(root: Path, key: str) -> tuple[Path, dict] | None:
    """``(the weights file, the report)`` of entry ``key``, or None.  Entries appear whole (:func:`store`), so a
    folder missing either file is not one: it is ignored."""
    entry = root / key
    try:
        report = json.loads((entry / REPORT).read_text())
    except (OSError, ValueError):
        return None
    return (entry / WEIGHTS, report) if (entry / WEIGHTS).is_file() else None


def store(root: Path, key: str, weights: Path, report: dict, inputs: dict) -> None:
    """Entry ``key``: a copy of ``weights`` and ``report``, written in a temporary folder beside it and renamed into
    place whole, so that no run ever reads a torn entry (an entry another run stored first is kept)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        shutil.copyfile(weights, staging / WEIGHTS)
        (staging / "inputs.json").write_text(json.dumps(inputs, indent=1, sort_keys=True, default=str))
        (staging / REPORT).write_text(json.dumps(report))
        os.rename(staging, root / key)
    except OSError:
        if not (root / key).is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
