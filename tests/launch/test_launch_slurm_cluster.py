"""Real SLURM: jobs submitted by ``launch.py`` to a 2-node test cluster on loopback (see ``slurm_cluster.py``).

About 2 minutes in all: cluster start ~5 s, a 2-node Ray job ~20 s, a failing job ~10 s, a failing ``ray start``
~10 s, a requeue ~40 s (the requeued job's 2-minute BeginTime is cut short with ``scontrol update StartTime=now``),
a cancel ~20 s.
"""

import json
import stat
from pathlib import Path

import pytest

from ppo.cluster.ports import free_port
from ppo.launch.executors import executor_from_record
from ppo.launch.slurm import render_sbatch
from ppo.metrics import read_records
from tests.launch.conftest import run_launch
from tests.launch.slurm_cluster import slurm
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster


def submit(cluster, toy, run_dir: Path, *overrides: str, nodes: int = 2, env: dict | None = None) -> str:
    rc, out, err = run_launch(
        str(toy), "--executor", "slurm", "--yes", "--allow-dirty", "--run-dir", str(run_dir),
        f"executor.nodes={nodes}", "executor.gpus_per_node=0", "executor.partition=debug", "executor.time_minutes=5",
        "executor.signal_delay_s=60", "executor.ray_loopback_base=12", f"executor.ray_port={free_port()}",
        "executor.ray_start_args=('--num-cpus=1', '--object-store-memory=80000000')", "executor.ray_join_timeout_s=90",
        *overrides, env={**cluster.env, **(env or {})})
    assert rc == 0, err
    assert "submitted SLURM job" in out
    job_id = json.loads((run_dir / "job.json").read_text())["job_id"]
    cluster.job_ids.append(job_id)
    return job_id


def wait_status(cluster, run_dir: Path, timeout: float = 150):
    return run_launch("status", str(run_dir), "--wait", env=cluster.env, timeout=timeout)


def test_two_node_job_brings_up_a_ray_cluster_and_runs_the_driver(cluster, toy, tmp_path):
    """On whole nodes (``--exclusive``) and under ``SLURM_EXACT``, whose job step still holds the CPUs it asked for:
    2 a task, 4 in all (a step that is not told ``--cpus-per-task`` itself gets 1 a task there)."""
    run_dir = tmp_path / "ray2"
    job_id = submit(cluster, toy, run_dir, "mode=ray", "expect_nodes=2", "executor.cpus_per_task=2",
                    "executor.additional_parameters={'exclusive': True}", env={"SLURM_EXACT": "1"})
    rc, out, err = wait_status(cluster, run_dir)
    logs = run_launch("logs", str(run_dir), env=cluster.env)[1]
    assert (rc, out) == (0, f"{run_dir}: SLURM job {job_id} COMPLETED\n"), logs
    accounted = slurm(cluster, "sacct", "-j", job_id, "--format=JobID,AllocCPUS", "--parsable2", "--noheader")
    cpus = dict(line.split("|") for line in accounted.split())
    assert cpus[f"{job_id}.0"] == "4", accounted
    records = read_records(run_dir / "metrics.jsonl")
    assert [r["ray/alive_nodes"] for r in records] == [2.0, 2.0, 2.0]
    submitted = (run_dir / "slurm" / f"{job_id}_submission.sh").read_text()
    record = json.loads((run_dir / "launch.json").read_text())
    assert submitted == render_sbatch(executor_from_record(record["executor"]), record["name"], run_dir)
    rendezvous = run_dir / "ray" / f"{job_id}-0"
    assert stat.S_IMODE((rendezvous / "auth_token").stat().st_mode) == 0o600
    assert {p.name for p in rendezvous.iterdir()} >= {"head", "joined-1", "done", "node-0.log", "node-1.log"}
    assert not Path(f"/tmp/ray-{job_id}-0-0").exists() and not Path(f"/tmp/ray-{job_id}-0-1").exists()


def test_a_failing_job_surfaces_its_error_through_status(cluster, toy, tmp_path):
    run_dir = tmp_path / "fails"
    job_id = submit(cluster, toy, run_dir, "mode=fail", nodes=1)
    rc, out, _ = wait_status(cluster, run_dir)
    assert (rc, out) == (1, f"{run_dir}: SLURM job {job_id} FAILED: RuntimeError: toy failure at step 2\n")
    rc, logs, _ = run_launch("logs", str(run_dir), env=cluster.env)
    assert rc == 0 and "Traceback" in logs and "toy failure at step 2" in logs


def test_a_ray_start_failure_surfaces_through_status(cluster, toy, tmp_path):
    run_dir = tmp_path / "raybad"
    job_id = submit(cluster, toy, run_dir, "executor.ray_start_args=('--no-such-ray-flag',)")
    rc, out, _ = wait_status(cluster, run_dir)
    assert rc == 1 and out.startswith(f"{run_dir}: SLURM job {job_id} FAILED: RuntimeError: ray start exited with 2")
    assert "--no-such-ray-flag" in out


def test_a_preempted_job_is_requeued_and_runs_again_in_the_same_run_dir(cluster, toy, tmp_path):
    run_dir = tmp_path / "preempt"
    job_id = submit(cluster, toy, run_dir, "mode=preempt")
    wait_for(lambda: (run_dir / "preempt-marker").exists(), 90, "the first attempt to start")
    slurm(cluster, "scancel", "--signal=USR2", job_id)
    wait_for(lambda: slurm(cluster, "squeue", "-h", "-j", job_id, "-o", "%T").strip() == "PENDING", 60, "the requeue")
    slurm(cluster, "scontrol", "update", f"JobId={job_id}", "StartTime=now")
    rc, out, _ = wait_status(cluster, run_dir)
    assert (rc, out) == (0, f"{run_dir}: SLURM job {job_id} (attempt 2) COMPLETED\n")
    assert [r["attempt"] for r in read_records(run_dir / "metrics.jsonl")] == [2.0, 2.0, 2.0]
    assert {p.name for p in (run_dir / "ray").iterdir()} == {f"{job_id}-0", f"{job_id}-1"}


def test_cancel_stops_a_running_job(cluster, toy, tmp_path):
    run_dir = tmp_path / "cancel"
    job_id = submit(cluster, toy, run_dir, "mode=preempt", nodes=1)
    wait_for(lambda: (run_dir / "preempt-marker").exists(), 90, "the job to start")
    rc, out, _ = run_launch("cancel", str(run_dir), env=cluster.env)
    assert (rc, out) == (0, f"{run_dir}: cancelled SLURM job {job_id}\n")
    rc, out, _ = wait_status(cluster, run_dir)
    assert rc == 1 and out.startswith(f"{run_dir}: SLURM job {job_id} CANCELLED")
