"""PPO on the real SLURM test cluster: a 2-node job (Ray head + worker) runs the embedded default, is preempted
mid-run, checkpoints at the step boundary, is requeued, and the requeued attempt resumes from that checkpoint."""

from __future__ import annotations

import json

import pytest

from ppo.cluster.ports import free_port
from ppo.metrics import load_metrics
from tests.launch.conftest import run_launch
from tests.launch.slurm_cluster import slurm
from tests.waiting import wait_for

from .conftest import SHORT_RUN
from .test_kill_resume import logged_steps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_a_preempted_ppo_job_checkpoints_at_the_step_and_resumes_after_the_requeue(cluster, tmp_path):
    run_dir = tmp_path / "ppo"
    # no warm start: what is checked is where the run stops and resumes, not what it learns
    overrides = [o for o in SHORT_RUN
                 if not o.startswith(("trainer.max_steps", "trainer.checkpoint_period", "trainer.warm_start_steps"))]
    rc, out, err = run_launch(
        "experiments/tiny_cpu.py", *overrides, "trainer.max_steps=8", "trainer.checkpoint_period=100",
        "trainer.warm_start_steps=0",
        "--executor", "slurm", "--yes", "--allow-dirty", "--run-dir", str(run_dir),
        "executor.nodes=2", "executor.gpus_per_node=0", "executor.partition=debug", "executor.time_minutes=10",
        "executor.signal_delay_s=90", "executor.ray_loopback_base=40", f"executor.ray_port={free_port()}",
        "executor.ray_start_args=('--num-cpus=2', '--object-store-memory=200000000')",
        "executor.ray_join_timeout_s=120", env=cluster.env, timeout=120)
    assert rc == 0, err
    job_id = json.loads((run_dir / "job.json").read_text())["job_id"]
    cluster.job_ids.append(job_id)

    wait_for(lambda: logged_steps(run_dir) >= 2, 300, "two PPO steps")
    slurm(cluster, "scancel", "--signal=USR2", job_id)
    wait_for(lambda: slurm(cluster, "squeue", "-h", "-j", job_id, "-o", "%T").strip() == "PENDING", 120, "the requeue")
    stopped_at = logged_steps(run_dir)
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == [f"step_{stopped_at:06d}"], "the preempted attempt checkpoints the step it finished"
    slurm(cluster, "scontrol", "update", f"JobId={job_id}", "StartTime=now")

    rc, out, _ = run_launch("status", str(run_dir), "--wait", env=cluster.env, timeout=400)
    logs = run_launch("logs", str(run_dir), env=cluster.env)[1]
    assert (rc, out) == (0, f"{run_dir}: SLURM job {job_id} (attempt 2) COMPLETED\n"), logs
    assert f"resumed from {run_dir / 'checkpoints' / f'step_{stopped_at:06d}'} (step {stopped_at})" in logs
    assert set(load_metrics(run_dir)["train/reward"]) == {str(s) for s in range(1, 9)}
