"""The placement plan (pure): where every rank goes, what it refuses, the grid, the refit routes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ppo.cluster.plan import EngineLayout, GroupLayout, PlacementError, Slot, plan_placement

ROOT = Path(__file__).resolve().parents[2]


def dsr1_like(**changes):
    settings = dict(nodes=8, gpus_per_node=8,
                    groups=[GroupLayout("policy", tensor=4, context=2, data=8),
                            GroupLayout("critic", tensor=2, data=32)],
                    generation=EngineLayout(engines=32, tensor=2))
    return plan_placement(**(settings | changes))


def test_dsr1_shape_uses_every_gpu_with_tensor_groups_inside_nodes():
    plan = dsr1_like()
    assert plan.gpus_used_line() == "GPUs used: 64 of 64"
    for role, tp in (("policy", 4), ("critic", 2), ("generation", 2)):
        slots = plan.ranks[role]
        assert len(set(slots)) == 64, f"{role}: one rank per GPU"
        for start in range(0, 64, tp):
            assert len({s.node for s in slots[start : start + tp]}) == 1, f"{role} TP group {start} crosses nodes"
    # a policy replica (TP 4 × CP 2 = 8 ranks) is one node; the 8 replicas cover the 8 nodes
    assert [plan.ranks["policy"][8 * r].node for r in range(8)] == list(range(8))


def test_replicas_spread_over_every_node_when_a_role_uses_fewer_gpus():
    plan = plan_placement(nodes=2, gpus_per_node=4, groups=[GroupLayout("policy", tensor=2, data=2)],
                          generation=EngineLayout(engines=2), allow_idle_gpus=True)
    assert plan.ranks["policy"] == (Slot(0, 0), Slot(0, 1), Slot(1, 0), Slot(1, 1))
    assert plan.ranks["generation"] == (Slot(0, 0), Slot(1, 0))
    assert plan.gpus_used_line() == "GPUs used: 4 of 8"


def test_ranks_that_do_not_divide_over_the_nodes_fill_them_in_order():
    plan = plan_placement(nodes=2, gpus_per_node=4, groups=[GroupLayout("policy", tensor=2, data=3)],
                          generation=EngineLayout(engines=6), allow_idle_gpus=True)
    assert plan.ranks["policy"] == (Slot(0, 0), Slot(0, 1), Slot(0, 2), Slot(0, 3), Slot(1, 0), Slot(1, 1))


@pytest.mark.parametrize("changes, message", [
    (dict(generation=EngineLayout(engines=32, tensor=3)),
     "generation.num_engines=32 × generation.tensor_parallel_size=3 = 96 GPUs, more than the 64 it can use"),
    (dict(generation=EngineLayout(engines=4, tensor=16)),
     "generation.tensor_parallel_size=16 does not fit in a node of executor.gpus_per_node=8"),
    (dict(generation=EngineLayout(engines=21, tensor=3)),
     "generation.tensor_parallel_size=3 puts ranks 6-8 on nodes 0, 1: each group must fit in one node"),
    (dict(groups=[GroupLayout("policy", tensor=16, data=4)]),
     "policy.parallel.tensor=16 spans nodes: tensor parallelism must fit in one node"),
    (dict(groups=[GroupLayout("policy", tensor=3, data=21)]),
     "policy.parallel.tensor=3 puts ranks 6-8 on nodes 0, 1"),
    (dict(groups=[GroupLayout("policy", tensor=4, data=32)]),
     "policy: tensor 4 × context 1 × pipeline 1 × data_parallel 32 = 128 ranks, more than the 64 GPUs it can use; "
     "lower policy.data_parallel"),
    (dict(groups=[GroupLayout("policy", tensor=4, context=2, data=8), GroupLayout("critic", tensor=2, data=16)]),
     "critic uses 32 of the 64 GPUs it could train on, the rest idle while it works; set critic.data_parallel=32 "
     "(or allow_idle_gpus=True)"),
    (dict(generation=EngineLayout(engines=1, tensor=2)),
     "generation.num_engines=1 × generation.tensor_parallel_size=2 uses 2 of the 64 GPUs, the rest idle while it "
     "generates; set generation.num_engines=32 (or allow_idle_gpus=True)"),
    (dict(groups=[GroupLayout("policy", data=0)]), "policy.data_parallel must be >= 1, got 0"),
    (dict(generation=EngineLayout(engines=0)), "generation.num_engines must be >= 1, got 0"),
    (dict(colocated=False, generation=EngineLayout(engines=64)),
     "generation.num_engines=64 × generation.tensor_parallel_size=1 takes all 64 GPUs and leaves none to train on"),
])
def test_unplaceable_layouts_are_refused_in_one_line_naming_the_setting(changes, message):
    with pytest.raises(PlacementError) as err:
        dsr1_like(**changes)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_separate_generation_gpus_come_after_the_training_gpus():
    plan = plan_placement(nodes=2, gpus_per_node=4, groups=[GroupLayout("policy", tensor=2, data=2)],
                          generation=EngineLayout(engines=2, tensor=2), colocated=False)
    assert plan.ranks["policy"] == (Slot(0, 0), Slot(0, 1), Slot(0, 2), Slot(0, 3))
    assert plan.ranks["generation"] == (Slot(1, 0), Slot(1, 1), Slot(1, 2), Slot(1, 3))
    assert [r.transport for r in plan.refit_routes()] == ["broadcast"] * 4


def test_refit_routes_pick_ipc_where_a_policy_tensor_rank_0_shares_the_engine_workers_gpu():
    plan = dsr1_like()
    routes = plan.refit_routes()
    assert len(routes) == 64, "one route per engine worker (32 engines of TP 2)"
    # engines of TP 2 start at GPUs 0, 2, 4, 6 of a node; policy TP-4 groups start at 0 and 4
    by_worker = {(r.engine, r.worker): (r.transport, r.sender) for r in routes}
    assert by_worker[0, 0] == ("ipc", 0) and by_worker[0, 1] == ("broadcast", 0)
    assert by_worker[1, 0] == by_worker[1, 1] == ("broadcast", 0) and by_worker[2, 0] == ("ipc", 4)
    assert by_worker[4, 0] == ("ipc", 8), "engine 4 is on node 1's GPU 0, with policy rank 8"
    assert sum(r.transport == "ipc" for r in routes) == 16


def test_cpu_only_plans_place_nothing_and_say_so():
    plan = plan_placement(nodes=1, gpus_per_node=0, groups=[GroupLayout("policy", data=2)],
                          generation=EngineLayout(engines=2))
    assert plan.cpu_only
    assert plan.grid().splitlines() == ["no GPUs declared: every rank is a CPU process (policy 2, generation 2)",
                                        "GPUs used: 0 of 0"]


def test_grid_shows_which_ranks_share_each_gpu():
    plan = plan_placement(nodes=2, gpus_per_node=2, groups=[GroupLayout("policy", tensor=2, data=2)],
                          generation=EngineLayout(engines=1, tensor=2), allow_idle_gpus=True)
    assert plan.grid().splitlines() == [
        "       gpu0     gpu1",
        "node0  P0 E0.0  P1 E0.1",
        "node1  P2       P3",
        "GPUs used: 4 of 4",
    ]


def test_the_plan_imports_neither_torch_nor_ray():
    code = ("import sys, ppo.cluster.plan, ppo.experiment; "
            "print(sorted(m for m in ('torch', 'ray', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_ray_cluster_of_another_shape_than_the_plan_is_refused():
    from ppo.cluster.placement import check_cluster_shape

    check_cluster_shape((2, 2), (2, 2))
    check_cluster_shape((1, 0), (1, 0))
    check_cluster_shape((2, 0), (1, 0))  # CPU-only: the plan puts every rank on the driver's node
    with pytest.raises(RuntimeError) as err:
        check_cluster_shape((1, 0), (2, 2))
    assert str(err.value) == ("the job was planned (and dry-run) for executor.nodes=1 × executor.gpus_per_node=0, but "
                              "its Ray cluster has 2 GPU node(s) × 2 GPUs; set those two to the cluster's shape")
    with pytest.raises(RuntimeError):
        check_cluster_shape((2, 2), (2, 1))
