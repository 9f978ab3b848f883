"""Where a recipe broke: the first FAIL after a PASS, and what changed between the two nights.

Walking a recipe's records in night order, a regression is a ``FAIL`` whose closest earlier judged night
(``INFRA-FAIL`` nights are skipped: they judged nothing) was a ``PASS``. For each one the dashboard shows:

- the commits in between: ``git log --oneline good..bad`` in the repository given to the dashboard (``--repo``,
  default the current directory), when that repository has both commits; otherwise only the two hashes, with the
  reason;
- the diff of the two records' flattened configs (``difflib.unified_diff``), which catches a changed recipe or a
  changed default even when the commits in between look unrelated.
"""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ppo.nightly.history import NightRecord

MAX_COMMITS = 200


@dataclass
class Regression:
    good: NightRecord
    bad: NightRecord
    commits: list[str] = field(default_factory=list)
    commits_note: str = ""
    config_diff: list[str] = field(default_factory=list)
    config_note: str = ""


def find_regressions(records: Sequence[NightRecord]) -> list[tuple[NightRecord, NightRecord]]:
    """``(last PASS, first FAIL)`` pairs of one recipe's records, which must be in night order."""
    pairs = []
    previous: NightRecord | None = None
    for record in records:
        if record.status == "INFRA-FAIL":
            continue
        if record.status == "FAIL" and previous is not None and previous.status == "PASS":
            pairs.append((previous, record))
        previous = record
    return pairs


def explain(good: NightRecord, bad: NightRecord, repo: str | Path | None) -> Regression:
    commits, commits_note = commits_between(good.git_commit, bad.git_commit, repo)
    diff, config_note = config_diff(good, bad)
    return Regression(good, bad, commits, commits_note, diff, config_note)


def commits_between(good: str | None, bad: str | None, repo: str | Path | None) -> tuple[list[str], str]:
    """``git log --oneline good..bad`` lines, or ``[]`` and a note saying why there are none."""
    if not good or not bad:
        return [], "a record has no git commit"
    if good == bad:
        return [], "same commit on both nights: look at the config diff, the package versions and the data"
    if repo is None:
        return [], "no repository given"
    try:
        done = subprocess.run(
            ["git", "log", "--oneline", "--no-decorate", f"-n{MAX_COMMITS}", f"{good}..{bad}", "--"],
            cwd=repo, capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"git log failed: {exc}"
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if line.strip()), "git log failed")
        return [], f"the repository does not have both commits ({first.strip()})"
    lines = done.stdout.splitlines()
    note = f"the newest {MAX_COMMITS} commits" if len(lines) >= MAX_COMMITS else ""
    if not lines:
        note = f"no commits in {good[:12]}..{bad[:12]} (the failing commit is not a descendant of the passing one)"
    return lines, note


def config_diff(good: NightRecord, bad: NightRecord) -> tuple[list[str], str]:
    if good.config_text is None or bad.config_text is None:
        return [], "a record has no flattened config"
    if good.config_text == bad.config_text:
        return [], "the flattened configs are identical"
    lines = difflib.unified_diff(
        good.config_text.splitlines(), bad.config_text.splitlines(),
        fromfile=f"{good.night} (PASS)", tofile=f"{bad.night} (FAIL)", lineterm="",
    )
    return list(lines), ""
