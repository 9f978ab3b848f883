"""Fixtures shared across test packages."""

import shutil
from pathlib import Path

import pytest

# Importing submitit runs logging.config.dictConfig, which closes every logging handler that exists then (pytest's
# capture among them); import it here, before any test module is collected.
import submitit  # noqa: F401


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
