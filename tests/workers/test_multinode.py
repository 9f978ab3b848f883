"""A dsr1_7b-shaped job on a real 2-node Ray cluster on this machine: every rank where the plan says, groups that span
nodes, data-parallel engines, and a refit that never passes the weights through the driver.

The job runs the way a user runs it on a cluster: ``launch.py --executor slurm`` on the SLURM test cluster, 2 nodes
× 2 GPUs.  The job's two Ray nodes bind distinct loopback IPs (127.0.0.60 and 127.0.0.61) and declare the 2 logical
GPUs SLURM allocated to each (``ray start --num-gpus=2``), so placement groups, ``CUDA_VISIBLE_DEVICES`` and
cross-node rendezvous are Ray's real ones while the workers run gloo on CPU tensors.  (One run serves both the
2-node Ray cluster and the SLURM job: on the 2-core CI machine each such run costs minutes of start-up.)  Two shapes,
the smallest that show every part of ``dsr1_7b``'s, both with the policy on TP 2 × 2 replicas (each tensor-parallel
pair inside a node, the group across both nodes):

- ``tp1_engines``: 4 vLLM engines, one per GPU: two share a GPU with a policy tensor-parallel rank 0 and receive the
  weights by IPC (shared memory here), the other two over a gloo broadcast group, one of them from the other node; a
  critic of 2 replicas, one per node (``allow_idle_gpus``);
- ``tp2_engines``: dsr1_7b's engines, 2 of TP 2, whose tensor-parallel workers are Ray actors in the bundles of their
  engine's two GPUs with the engine's GPU share (``ppo.rollout.ray_executor``), as on GPUs; a critic of 4 replicas.

The TP-2 run also checks that the driver's bytes per step stay about the batch's size with groups of 2 and 4
data-parallel ranks.

The run writes ``placement.json`` with what every actor (and every engine's every worker) reports from inside (node
IP, Ray's GPU IDs, its group's MASTER_ADDR); the tests compare that with the plan.  A higher policy learning rate
makes the weights move enough that an engine left with stale weights would show in ``train/token_mult_prob_error``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.cluster.ports import free_port
from ppo.metrics import load_metrics

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_BASE = 60
NODE_IPS = (f"127.0.0.{LOOPBACK_BASE}", f"127.0.0.{LOOPBACK_BASE + 1}")
GPUS_PER_NODE = 2
TIMEOUT = 900

SHAPES = {
    # 4 vLLM engines, one per GPU: two share a GPU with a policy tensor-parallel rank 0 and receive the weights by IPC
    # (shared memory here), the other two over a gloo broadcast group, one of them from the other node
    "tp1_engines": [
        "policy.parallel.tensor=2", "policy.data_parallel=2", "policy.num_threads=1",
        "critic.data_parallel=2", "critic.num_threads=1",
        "generation.num_engines=4", "allow_idle_gpus=True",
    ],
    # dsr1_7b's engines: 2 engines of TP 2, each one's workers in the bundles of its two GPUs (vLLM's Ray executor);
    # the critic on 4 data-parallel ranks; 8 layers in buckets of 64 KB, so a refit takes 10 buckets (the embedding,
    # each layer, the final norm: a layer is ~0.8 MB and is never split)
    "tp2_engines": [
        "policy.parallel.tensor=2", "policy.data_parallel=2", "policy.num_threads=1",
        "critic.data_parallel=4", "critic.num_threads=1",
        "generation.num_engines=2", "generation.tensor_parallel_size=2",
        "model.num_layers=8", "generation.refit_bucket_bytes=65536",
    ],
}
"""dsr1_7b-like layouts on 2 nodes × 2 GPUs."""

SHORT = [
    "trainer.max_steps=2", "trainer.generations_per_prompt=4",
    "trainer.num_minibatches=2", "trainer.warm_start_steps=2", "trainer.val_period=2", "task.val_size=16",
    "trainer.checkpoint_period=2", "policy.optimizer.lr=1e-3",
]
"""2 steps of 4 samples a prompt (:data:`PROMPTS` a step; the second generates with the weights the first step's
update refitted into every engine): at 256 prompts the driver's fixed per-step bytes (call
arguments, the ranks' manifests, bucket metadata: 40-60 KB here, whatever the batch) stay small beside the batch (at
128 they were 17-23% of a 250 KB batch; a real batch is hundreds of MB)."""

CLUSTER = ["executor.cpus_per_task=2", "executor.mem_gb=1"]
"""The test cluster's nodes: 2 CPUs, 2000 MB (the plan would ask for a core per worker process)."""


PROMPTS = {"tp1_engines": 64, "tp2_engines": 256}
"""Prompts a step: the TP-2 run checks the driver's traffic, with batches large enough that the driver's fixed
per-step bytes stay small beside them (see :data:`SHORT`)."""


@pytest.fixture(scope="module", params=sorted(SHAPES))
def multinode_run(request, cluster, tmp_path_factory) -> tuple[str, Path]:
    """The shape as a 2-node SLURM job (``--gpus-per-node=2``; the test cluster's GPUs are logical)."""
    from tests.launch.conftest import run_launch

    run_dir = tmp_path_factory.mktemp("multinode") / "run"
    rc, out, err = run_launch(
        "experiments/tiny_cpu.py", *SHAPES[request.param], *SHORT, f"trainer.prompts_per_step={PROMPTS[request.param]}",
        *CLUSTER, "--executor", "slurm", "--yes",
        "--allow-dirty", "--run-dir", str(run_dir), "executor.nodes=2", f"executor.gpus_per_node={GPUS_PER_NODE}",
        "executor.partition=debug", "executor.time_minutes=20", f"executor.ray_loopback_base={LOOPBACK_BASE}",
        f"executor.ray_port={free_port()}", "executor.ray_start_args=('--num-cpus=8',)",
        "executor.ray_join_timeout_s=120", "trainer.start_timeout_s=600", env=cluster.env, timeout=120)
    assert rc == 0, err
    cluster.job_ids.append(json.loads((run_dir / "job.json").read_text())["job_id"])
    rc, out, _ = run_launch("status", str(run_dir), "--wait", env=cluster.env, timeout=TIMEOUT)
    if rc != 0 or "COMPLETED" not in out:
        pytest.fail(f"the 2-node job did not complete:\n{run_launch('logs', str(run_dir), env=cluster.env)[1][-5000:]}")
    return request.param, run_dir


def placement(run_dir: Path) -> dict:
    return json.loads((run_dir / "placement.json").read_text())


GRIDS = {
    "tp1_engines": ["node0  P0 C0 E0.0  P1 E1.0", "node1  P2 C1 E2.0  P3 E3.0"],
    "tp2_engines": ["node0  P0 C0 E0.0  P1 C1 E0.1", "node1  P2 C2 E1.0  P3 C3 E1.1"],
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("executor", [
    ["--executor", "slurm", "executor.nodes=2", f"executor.gpus_per_node={GPUS_PER_NODE}"],
    # a local driver joining a 2-node Ray cluster (RAY_ADDRESS) says the cluster's shape
    ["--executor", "local", "executor.nodes=2", f"executor.gpus_per_node={GPUS_PER_NODE}"],
])
def test_the_dry_run_shows_the_map_the_run_uses(executor, shape):
    """The run's command with ``--dry-run`` prints the grid the run places (checked in the tests below)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), str(ROOT / "experiments" / "tiny_cpu.py"), *SHAPES[shape], *SHORT,
         *executor, "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    grid = result.stdout.split("== GPU map")[1].split("\n\n")[0]
    for row in GRIDS[shape]:
        assert row in grid
    assert "GPUs used: 4 of 4" in grid


def assert_placed_as_planned(run_dir: Path, node_ips: tuple[str, str]) -> None:
    """Every rank, and every engine's every tensor-parallel worker, reports from inside the node and GPU its plan
    slot names (a slot's GPU is the one Ray gave its bundle: the same ID for every rank placed there)."""
    record = placement(run_dir)
    assert (record["nodes"], record["gpus_per_node"]) == (2, GPUS_PER_NODE)
    assert record["used"] == "GPUs used: 4 of 4"
    plan, actors = record["plan"], record["actors"]
    tensor = len(plan["generation"]) // len(actors["generation"])
    reported = {role: actors[role] for role in ("policy", "critic")}
    # an engine's workers, in tensor-parallel order, stand for its ranks in the plan
    reported["generation"] = [worker for engine in actors["generation"] for worker in engine["workers"]]
    node_ip, gpu_id = {}, {}
    for role, infos in reported.items():
        assert len(infos) == len(plan[role]), role
        for rank, (node, gpu) in enumerate(plan[role]):
            info = infos[rank]
            assert node_ip.setdefault(node, info["node_ip"]) == info["node_ip"], (role, rank, info)
            assert len(info["gpu_ids"]) == 1, (role, rank, info)
            assert gpu_id.setdefault((node, gpu), str(info["gpu_ids"][0])) == str(info["gpu_ids"][0]), (role, rank)
    assert sorted(node_ip.values()) == sorted(node_ips), "the two plan nodes are the two Ray nodes"
    for node in (0, 1):
        assert gpu_id[(node, 0)] != gpu_id[(node, 1)], "two GPUs of a node are two devices"
    for engine in actors["generation"]:
        assert [w["rank"] for w in engine["workers"]] == list(range(tensor))
        assert len({w["pid"] for w in engine["workers"]}) == tensor, "one process per tensor-parallel rank"
    policy = actors["policy"]
    assert policy[0]["node_ip"] == policy[1]["node_ip"] and policy[2]["node_ip"] == policy[3]["node_ip"], \
        "each policy tensor-parallel pair shares a node"
    for role in ("policy", "critic"):
        infos = actors[role]
        assert {i["node_ip"] for i in infos} == set(node_ips), f"the {role} group spans both nodes"
        assert {i["master_addr"] for i in infos} == {infos[0]["node_ip"]}, "MASTER_ADDR is rank 0's node IP"
        assert {i["local_rank"] for i in infos} == {0}, "the device comes from what Ray made visible, not the rank"
        assert {i["device"] for i in infos} == {"cpu"}


def assert_trained_with_a_driverless_refit(run_dir: Path) -> None:
    m = load_metrics(run_dir)
    assert set(m["train/reward"]) == {"1", "2"}
    assert min(m["train/refit_bytes"].values()) > 2_000_000, "the whole model (about 2.4 MB) reached the engines"
    assert max(m["train/refit_driver_bytes"].values()) < 16_384, "only metadata went through the driver"
    # every engine generates its share of the samples; with stale weights on any of them, vLLM's logprobs would
    # disagree with the trainer's after the policy's lr-1e-3 updates (an engine that never loads its broadcast
    # buckets gives 2.2-2.5 here)
    assert max(m["train/token_mult_prob_error"].values()) < 1.02
    assert (run_dir / "checkpoints" / "step_000002").is_dir()


@pytest.mark.cluster
def test_every_rank_sits_where_the_plan_says(multinode_run):
    assert_placed_as_planned(multinode_run[1], NODE_IPS)


@pytest.mark.cluster
def test_both_refit_transports_are_used(multinode_run):
    shape, run_dir = multinode_run
    routes = {r["engine"]: (r["transport"], r["sender"]) for r in placement(run_dir)["routes"]}
    if shape == "tp1_engines":  # engines 0 and 2 share a GPU with policy ranks 0 and 2 (tensor-parallel rank 0)
        assert routes == {0: ("ipc", 0), 1: ("broadcast", 0), 2: ("ipc", 2), 3: ("broadcast", 0)}
    else:  # each engine's first GPU holds a policy tensor-parallel rank 0; its second worker hears rank 0's broadcast
        routes = {(r["engine"], r["worker"]): (r["transport"], r["sender"]) for r in placement(run_dir)["routes"]}
        assert routes == {(0, 0): ("ipc", 0), (0, 1): ("broadcast", 0), (1, 0): ("ipc", 2), (1, 1): ("broadcast", 0)}


@pytest.mark.cluster
def test_two_steps_train_and_the_refit_bypasses_the_driver(multinode_run):
    assert_trained_with_a_driverless_refit(multinode_run[1])


@pytest.mark.cluster
def test_the_drivers_traffic_does_not_grow_with_the_ranks(multinode_run):
    """A step's bytes from the driver stay about the batch's size, with 2 and 4 data-parallel ranks a group (the
    policy on 2, the critic on 4; each rank receiving the batch by value would be 2-4 times that per call)."""
    shape, run_dir = multinode_run
    if shape != "tp2_engines":
        pytest.skip("the traffic is checked on the TP-2 run, whose batches are large enough (PROMPTS)")
    m = load_metrics(run_dir)
    for step, sent in m["train/driver_bytes"].items():
        assert sent <= 1.2 * m["train/batch_bytes"][step], (step, sent, m["train/batch_bytes"][step])


@pytest.mark.cluster
def test_every_worker_runs_the_threads_its_plan_gives(multinode_run):
    """Each Megatron rank's OpenMP, MKL and torch threads are its role's ``num_threads``; each engine's OpenMP and
    MKL threads the plan's share of its node's CPUs (``executor.cpus_per_task`` over the node's processes), none of
    them what the process would inherit (Ray sets ``OMP_NUM_THREADS`` alone, to 1)."""
    record = placement(multinode_run[1])
    assert record["threads"] == 1, "2 CPUs a node for 8 or more processes"
    for role in ("policy", "critic"):
        for info in record["actors"][role]:
            assert (info["threads"], info["omp_threads"], info["mkl_threads"]) == (1, "1", "1"), (role, info)
    for info in record["actors"]["generation"]:
        assert (info["omp_threads"], info["mkl_threads"]) == ("1", "1"), info


@pytest.mark.cluster
def test_engines_start_after_the_groups_give_up_their_gpus(multinode_run):
    """vLLM sizes its memory from what is free when it starts: where engines share GPUs with the Megatron ranks,
    every rank has offloaded (after the warm start) before any engine begins to build."""
    actors = placement(multinode_run[1])["actors"]
    offloaded = [info["first_offload_at"] for role in ("policy", "critic") for info in actors[role]]
    assert None not in offloaded, "every Megatron rank offloaded before the placement was recorded"
    first_engine = min(info["started_at"] for info in actors["generation"])
    assert first_engine > max(offloaded), (first_engine, max(offloaded))


@pytest.mark.cluster
def test_engines_of_tp_2_refit_in_many_buckets_with_no_host_bytes(multinode_run):
    """Each TP-2 engine's workers take every bucket themselves (IPC from the policy rank on their GPU, or the refit
    group's broadcast, one of them from the other node): 10 buckets a refit, none of their bytes serialised into
    the engines' messages to their workers."""
    shape, run_dir = multinode_run
    if shape != "tp2_engines":
        pytest.skip("the TP-2 engines' refit")
    m = load_metrics(run_dir)
    assert min(m["train/refit_buckets"].values()) >= 10
    assert max(m["train/refit_host_bytes"].values()) == 0, "weights went through the host to the engines' workers"


@pytest.mark.cluster
def test_engines_of_tp_2_answer_as_an_engine_started_from_the_exported_weights(multinode_run, tmp_path):
    """After step 2's refit the TP-2 engines' greedy validation answers are those of an engine started from step 2's
    exported weights (:mod:`tests.workers.greedy_reference`: vLLM's own loader, at TP 1)."""
    shape, run_dir = multinode_run
    if shape != "tp2_engines":
        pytest.skip("the TP-2 engines' refit")
    out = tmp_path / "greedy.json"
    done = subprocess.run([sys.executable, "-m", "tests.workers.greedy_reference", str(run_dir), "2", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reference = json.loads(out.read_text())
    rows = [json.loads(line) for line in (run_dir / "samples" / "step_2.jsonl").read_text().splitlines()]
    validated = {r["record_id"]: r["response"] for r in rows if r.get("mode") == "greedy"}
    assert len(validated) == 16 and validated == {k: reference[k] for k in validated}
