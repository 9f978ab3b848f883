from pathlib import Path

import submitit  # noqa: F401 - import before any test captures output (see tests/launch/conftest.py)

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(p for p in (REPO / "experiments").glob("*.py") if not p.name.startswith("_"))
"""Every experiment file (``_base.py`` and other ``_*.py`` modules are shared code, not experiments)."""
