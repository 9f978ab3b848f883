"""Fixtures shared across test packages.

No test reaches the Hugging Face hub or sees this machine's caches: for the whole session (subprocesses included)
``HF_HUB_OFFLINE=1``, and the HF cache, ``PPO_DATA_ROOT`` and the warm-start cache (``PPO_WARM_START_CACHE``) are
empty folders made for it (runs of the session with the same warm start share it; none sees an earlier session's).
Tests that need a filled cache fill their own (``tests/hub/cache.py``).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Importing submitit runs logging.config.dictConfig, which closes every logging handler that exists then (pytest's
# capture among them); import it here, before any test module is collected.
import submitit  # noqa: F401

_CACHES = Path(tempfile.mkdtemp(prefix="ppo-tests-caches-"))
atexit.register(shutil.rmtree, _CACHES, True)
os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(_CACHES / "hub"), PPO_DATA_ROOT=str(_CACHES / "data"),
                  PPO_WARM_START_CACHE=str(_CACHES / "warm_start"))


@pytest.fixture(scope="session")
def cluster():
    """One real 2-node SLURM cluster on loopback for the whole session (``tests/launch/slurm_cluster.py``), stopped by
    PID at the end; tests append their job ids to ``cluster.job_ids`` so Ray's per-job temp dirs are removed."""
    from tests.launch.slurm_cluster import SlurmCluster, missing_reason

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    slurm = SlurmCluster()
    slurm.start()
    slurm.job_ids = []
    yield slurm
    slurm.stop()
    for job_id in slurm.job_ids:
        for leftover in Path("/tmp").glob(f"ray-{job_id}*"):
            shutil.rmtree(leftover, ignore_errors=True)
