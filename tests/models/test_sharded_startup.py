"""A rank reads only its own shard of an HF checkpoint at start-up: the same bits as converting the whole state dict,
for every TP rank and pipeline stage, with a byte count equal to its shard's size (the whole-file path holds the
whole model on every rank)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ppo.cluster.ports import free_port
from tests.models.conftest import make_hf_model

ROOT = Path(__file__).resolve().parents[2]


def nbytes(state: dict) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def write_checkpoint(tmp_path, variant: str, *, tied: bool, dtype=torch.float32, head: bool = True,
                     shard_bytes: int | None = None) -> tuple[Path, dict]:
    """A tiny HF folder (with a ``score.weight`` value head when ``head``), in several files with an index when
    ``shard_bytes`` is given; returns the folder and its state dict."""
    from ppo.models.convert import save_hf_checkpoint
    from ppo.models.export import write_hf_export

    hf = make_hf_model(variant, tied=tied)
    state = {k: v.to(dtype) for k, v in hf.state_dict().items() if not (tied and k == "lm_head.weight")}
    if head:
        state["score.weight"] = torch.randn(1, hf.config.hidden_size, generator=torch.Generator().manual_seed(3))
    folder = save_hf_checkpoint(state, hf.config.to_dict(), tmp_path / "hf")
    if shard_bytes is not None:
        pieces = ({name: tensor} for name, tensor in state.items())
        folder = write_hf_export(pieces, folder, tmp_path / "sharded", shard_bytes=shard_bytes)
    return folder, state


def assert_same_bits(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name


@pytest.mark.parametrize("variant, tied, dtype", [("qwen2", False, torch.float32), ("qwen2", True, torch.bfloat16),
                                                  ("qwen3", False, torch.float32)])
def test_each_rank_reads_the_bits_of_the_whole_state_dicts_conversion(tmp_path, variant, tied, dtype):
    """TP 1/2 × PP 1/2, policy and critic, from a checkpoint in several files: what a rank reads of the files equals
    what converting transformers' whole state dict gives it, and it reads exactly its shard's bytes."""
    from ppo.models.architecture import Architecture
    from ppo.models.convert import SafetensorsFiles, StateDict, hf_to_megatron, pipeline_stage

    folder, state = write_checkpoint(tmp_path, variant, tied=tied, dtype=dtype, shard_bytes=200_000)
    assert (folder / "model.safetensors.index.json").is_file()
    arch = Architecture.from_pretrained(folder)
    for tp in (1, 2):
        for pp in (1, 2):
            for value_head in (False, True):
                for tp_rank in range(tp):
                    for stage in range(pp):
                        options = dict(tp_rank=tp_rank, tp_size=tp, value_head=value_head,
                                       **pipeline_stage(arch.num_layers, stage, pp))
                        whole = StateDict(state)
                        expected = hf_to_megatron(whole, arch, **options)
                        source = SafetensorsFiles(folder)
                        shard = hf_to_megatron(source, arch, **options)
                        assert_same_bits(shard, expected)
                        assert source.bytes_loaded == nbytes(shard)
                        assert whole.bytes_loaded == nbytes(state)


def test_a_pipeline_stage_holds_its_own_layers_and_the_stages_together_hold_the_model(tmp_path):
    """PP 2 × TP 2: each stage's layers are numbered from 0 and gather back (``megatron_to_hf``) into exactly the HF
    tensors of its layers; the first stage has the embedding, the last the norm and the head."""
    from ppo.models.architecture import Architecture
    from ppo.models.convert import SafetensorsFiles, hf_to_megatron, megatron_to_hf, pipeline_stage

    folder, state = write_checkpoint(tmp_path, "qwen2", tied=False, head=False)
    arch = Architecture.from_pretrained(folder)
    rebuilt = {}
    for stage in range(2):
        owned = pipeline_stage(arch.num_layers, stage, 2)
        shards = [hf_to_megatron(SafetensorsFiles(folder), arch, tp_rank=r, tp_size=2, **owned) for r in range(2)]
        assert ("embedding.word_embeddings.weight" in shards[0]) == (stage == 0)
        assert ("output_layer.weight" in shards[0]) == (stage == 1)
        rebuilt.update(megatron_to_hf(shards, arch, layer_offset=owned["layers"].start))
    assert_same_bits(rebuilt, state)


def run_ranks(module: str, *args: str, world_size: int = 2) -> None:
    """``python -m module *args`` as ``world_size`` gloo ranks on loopback."""
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(log[-3000:] for log in logs)


@pytest.mark.slow
def test_tp2_workers_read_their_own_shards_and_the_critic_starts_from_the_policys(tmp_path):
    """The policy and critic workers at TP 2: each rank's weights are the whole-state-dict conversion's shard, and
    the bytes it read are that shard (about half the model; the ranks together read the model once, plus the
    replicated norms once more); the critic reads its shard of the weights policy rank 0 wrote from memory, not a
    gathered copy."""
    from ppo.models.architecture import Architecture
    from ppo.models.convert import hf_to_megatron
    from ppo.workers.memory import shard_parameters

    folder, state = write_checkpoint(tmp_path, "qwen2", tied=False, head=False)
    arch = Architecture.from_pretrained(folder)
    run_ranks("tests.models.startup_worker", str(folder), str(tmp_path / "out"))
    ranks = [torch.load(tmp_path / f"out.rank{r}.pt") for r in range(2)]

    replicated = nbytes({k: v for k, v in state.items() if k.endswith("norm.weight")})
    # the memory plan's parameters of a TP rank (ppo.workers.memory), in the checkpoint's 4 bytes a parameter; the
    # critic's head is not in the policy's file (it starts random)
    policy_shard, critic_shard = (4 * shard_parameters(arch, 2, value_head=head) for head in (False, True))
    for r, rank in enumerate(ranks):
        expected = hf_to_megatron(state, arch, tp_rank=r, tp_size=2)
        assert_same_bits(rank["policy"], expected)
        assert rank["policy_bytes"] == nbytes(expected) == policy_shard
        backbone = {k: v for k, v in expected.items() if k != "output_layer.weight"}
        # the worker doubled the policy's weights before writing them: the critic starts from those
        assert_same_bits({k: v for k, v in rank["critic"].items() if k != "output_layer.weight"},
                         {k: 2 * v for k, v in backbone.items()})
        assert rank["critic_bytes"] == nbytes(backbone) == critic_shard - 4 * arch.hidden_size
    assert sum(rank["policy_bytes"] for rank in ranks) == nbytes(state) + replicated
    print(f"\nstart-up bytes read per TP-2 rank: {[rank['policy_bytes'] for rank in ranks]} of {nbytes(state)} "
          f"({ranks[0]['policy_bytes'] / nbytes(state):.3f} of the model; the whole-file path: 1.000)")
