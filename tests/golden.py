"""Golden files: compare text with a checked-in file, or rewrite the file on purpose.

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/launch tests/experiments     # rewrite, then review the git diff

(``UPDATE_GOLDENS=1`` works too.)  Texts are normalised first (:func:`normalise`) so goldens hold no machine paths.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

UPDATE_ENV = "UPDATE_GOLDEN"
UPDATE_ENVS = (UPDATE_ENV, "UPDATE_GOLDENS")
REPO = Path(__file__).resolve().parents[1]
RUN_DIR = Path("/shared/runs/toy-20260101-000000")
"""The run directory sbatch goldens are rendered for (any fixed path that is not this machine's)."""


def normalise(text: str) -> str:
    """This machine's interpreter and checkout out of ``text``: ``<PYTHON>``, ``<CHECKOUT>`` (data beside the checkout,
    such as ``ppo.data.SHARED_GSM8K_DIR``, becomes ``<CHECKOUT>/../shared/...``)."""
    text = text.replace(sys.executable, "<PYTHON>").replace(str(REPO), "<CHECKOUT>")
    return text.replace(f"{REPO.parent}/", "<CHECKOUT>/../") if REPO.parent != REPO.parent.parent else text


def assert_matches_golden(golden: Path, text: str) -> None:
    """``text`` equals ``golden``'s contents; with ``UPDATE_GOLDEN=1`` in the environment, ``golden`` is rewritten."""
    if any(os.environ.get(name) for name in UPDATE_ENVS):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    update = f"{UPDATE_ENV}=1 .venv/bin/python -m pytest {golden.parent.parent.relative_to(REPO)}"
    where = golden.relative_to(REPO)
    assert golden.exists(), f"missing {where}: run {update}"
    assert text == golden.read_text(), f"{where} differs; if intended: {update}, then review the diff"
