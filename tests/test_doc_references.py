"""Every file the code and the docs cite by path exists: a moved module or a renamed doc leaves no dangling
reference (``docs/architecture.md`` was cited for months before it was written)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.])((?:docs|ppo|analysis|bench|tests)/[\w/.-]+\.(?:md|py))")
"""Cited docs and modules (``experiments/`` and ``sweeps/`` paths in the docs are often files a command writes)."""
SOURCES = ["README.md", "docs/*.md", "ppo/**/*.py", "experiments/*.py", "sweeps/*.py", "analysis/*.py", "bench/*.py",
           "tests/**/*.py"]


def cited_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in CITED.findall(text)}


def test_every_cited_path_exists():
    dangling = {}
    for pattern in SOURCES:
        for source in sorted(ROOT.glob(pattern)):
            missing = sorted(p for p in cited_paths(source.read_text()) if "*" not in p and not (ROOT / p).exists())
            if missing:
                dangling[str(source.relative_to(ROOT))] = missing
    assert dangling == {}


def test_a_dangling_reference_is_found():
    assert cited_paths("see ``docs/architecture.md`` and ppo/loop/trainer.py.") == {"docs/architecture.md",
                                                                                     "ppo/loop/trainer.py"}
    assert cited_paths("tests/workers/test_plan.py, not workers/plan.py") == {"tests/workers/test_plan.py"}
