import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Importing submitit runs logging.config.dictConfig, which closes every logging handler that exists then; import it
# before any test captures output, or pytest's capture files get closed mid-test.
import submitit  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "launch" / "recipes" / "toy.py"


@functools.cache
def launch_script():
    """``launch.py`` loaded as a module: its ``main(argv)`` is what ``python launch.py ARGV`` runs, in this process."""
    spec = importlib.util.spec_from_file_location("launch_script", REPO / "launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_launch(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """``python launch.py ARGS`` in a subprocess: (returncode, stdout, stderr)."""
    result = subprocess.run([sys.executable, str(REPO / "launch.py"), *args], cwd=cwd or REPO, capture_output=True,
                            text=True, timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture
def toy() -> Path:
    return TOY
