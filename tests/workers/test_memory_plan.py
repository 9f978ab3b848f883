"""The memory plan (``ppo/workers/memory.py``): its exact parts against the real objects, and what it refuses.

Parameters, gradient buffers and optimizer state are counted from a Megatron model that ``ModelUpdater`` has stepped
once (TP 1 and TP 2, fp32 and bf16, the distributed optimizer over 2 data-parallel ranks), in processes of their own
(gloo); the vLLM KV cache from the engine's own block count (``tests/rollout``'s engine).  The dry-run lines are
checked on the recipes as a user runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppo.cluster.plan import EngineLayout, GroupLayout, plan_placement
from ppo.cluster.ports import free_port
from ppo.models.architecture import Architecture
from ppo.workers.memory import (
    CUDA_CONTEXT_BYTES,
    GIB,
    EngineMemory,
    GroupMemory,
    MemoryPlanError,
    kv_bytes_per_token,
    model_state_bytes,
    plan_memory,
    shard_parameters,
)

ROOT = Path(__file__).resolve().parents[2]

TINY = {"model_type": "qwen2", "vocab_size": 96, "hidden_size": 128, "intermediate_size": 192,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 64}


def measured(tmp_path: Path, kind: str, dtype: str, *, tensor: int, world: int, distributed: bool) -> list[dict]:
    """What each rank of a ``world``-process group at TP ``tensor`` really holds after one step."""
    port, out = free_port(), tmp_path / f"{kind}-{dtype}-{tensor}-{world}.json"
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tests.workers.memory_worker", json.dumps(TINY), kind, dtype, str(tensor),
             "1" if distributed else "0", str(out)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(log[-3000:] for log in logs)
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind, dtype, tensor, world, distributed", [
    ("policy", "float32", 1, 2, True),  # fp32 (no master copy), the optimizer state divided over 2 DP ranks
    ("policy", "bfloat16", 2, 2, False),
    ("critic", "bfloat16", 2, 2, False),
])
def test_the_plan_counts_what_megatron_allocates(tmp_path, kind, dtype, tensor, world, distributed):
    arch = Architecture.from_hf_config(TINY)
    params = shard_parameters(arch, tensor, value_head=kind == "critic")
    expected = model_state_bytes(params, dtype, data=world // tensor, distributed=distributed)
    for rank in measured(tmp_path, kind, dtype, tensor=tensor, world=world, distributed=distributed):
        assert rank["parameters"] == params, rank
        assert {k: rank[k] for k in expected} == expected, rank


def test_the_kv_cache_is_what_vllm_makes_of_its_bytes():
    """vLLM's page: block_size × kv heads per rank × (key + value head size) × dtype bytes per layer
    (``vllm/v1/kv_cache_interface.py``); its blocks from ``kv_cache_memory_bytes``."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    arch = Architecture.from_hf_config(TINY | {"num_hidden_layers": 3})
    import torch

    for tensor in (1, 2, 4):  # 4 exceeds the model's 2 KV heads: vLLM replicates them
        engine = EngineMemory(tensor=tensor, dtype="bfloat16", gpu_memory_utilization=0.5, kv_cache_bytes=None,
                              max_model_len=64)
        spec = FullAttentionSpec(block_size=16, num_kv_heads=max(1, arch.num_key_value_heads // tensor),
                                 head_size=arch.head_dim, dtype=torch.bfloat16)
        assert kv_bytes_per_token(arch, engine) == arch.num_layers * spec.page_size_bytes // spec.block_size


def small_plan(**engine_overrides):
    """2 policy ranks and 2 engines on one node of 2 GPUs of 4 GiB."""
    arch = Architecture.from_hf_config(TINY)
    placement = plan_placement(nodes=1, gpus_per_node=2, groups=[GroupLayout("policy", data=2)],
                               generation=EngineLayout(engines=2))
    group = GroupMemory(name="policy", tensor=1, data=2, dtype="bfloat16", distributed_optimizer=True,
                        micro_batch_tokens=64)
    engine = EngineMemory(**({"tensor": 1, "dtype": "bfloat16", "gpu_memory_utilization": 0.5,
                              "kv_cache_bytes": None, "max_model_len": 64} | engine_overrides))
    return plan_memory(placement, arch, [group], engine, gpu_memory_gib=4.0, source="the test")


def test_the_engine_takes_its_budget_and_the_kv_cache_what_is_left():
    """vLLM's rule: the engine's process (its context included) takes gpu_memory_utilization × the GPU."""
    arch = Architecture.from_hf_config(TINY)
    plan = small_plan()
    generation = plan.gpus[0].phases["generation"]
    assert sum(v for k, v in generation.items() if k.startswith("engine ")) + CUDA_CONTEXT_BYTES == 2 * GIB
    assert generation["engine weights"] == shard_parameters(arch, 1) * 2
    per_token = kv_bytes_per_token(arch, EngineMemory(1, "bfloat16", 0.5, None, 64))
    assert plan.kv_tokens == generation["engine KV cache"] // per_token
    given = small_plan(kv_cache_bytes=64 << 20).gpus[0].phases["generation"]
    assert given["engine KV cache"] == 64 << 20


def test_an_engine_whose_kv_cache_cannot_hold_one_sequence_is_refused():
    with pytest.raises(MemoryPlanError, match="generation.max_model_len=1000000"):
        small_plan(max_model_len=1_000_000)


def test_the_refit_holds_the_policy_weights_and_the_engine_weights_but_no_kv_cache():
    refit = small_plan().gpus[0].phases["refit"]
    assert {"policy weights", "engine weights"} <= set(refit)
    assert not {"engine KV cache", "policy gradients", "policy optimizer"} & set(refit)
