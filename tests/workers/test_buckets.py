"""The refit's byte buckets: planned in order within the size, packed and viewed back bit for bit."""

from __future__ import annotations

import torch

from ppo.workers.buckets import bucket_size, layer_chunks, pack, plan_chunk_buckets, unpack


def state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a": torch.randn(3, 4, generator=g),  # 48 bytes
            "b": torch.randn(5, generator=g).to(torch.bfloat16),  # 10 bytes
            "big": torch.randn(40, generator=g),  # 160 bytes: over the bucket size, a bucket of its own
            "c": torch.arange(6, dtype=torch.int64).reshape(2, 3)}  # 48 bytes


def chunks(weights: dict) -> list[dict]:
    return [{"a": weights["a"]}, {"b": weights["b"]}, {"big": weights["big"]}, {"c": weights["c"]}]


def test_buckets_hold_whole_chunks_in_order_within_the_size():
    plan = plan_chunk_buckets(chunks(state()), bucket_bytes=64)
    assert [indices for indices, _ in plan] == [[0, 1], [2], [3]]
    buckets = [entries for _, entries in plan]
    assert [[e.name for e in b] for b in buckets] == [["a", "b"], ["big"], ["c"]]
    assert [bucket_size(b) for b in buckets] == [58, 160, 48]
    assert [e.offset for e in buckets[0]] == [0, 48]
    two_at_once = plan_chunk_buckets([{"a": state()["a"], "c": state()["c"]}], bucket_bytes=64)
    assert [[e.name for e in b] for _, b in two_at_once] == [["a", "c"]], "a chunk is never split"


def test_chunks_are_the_embedding_each_layer_then_the_head():
    keys = ["embedding.word_embeddings.weight", "decoder.layers.10.mlp.linear_fc1.weight",
            "decoder.layers.2.self_attention.linear_qkv.weight", "decoder.layers.2.mlp.linear_fc2.weight",
            "decoder.final_layernorm.weight", "output_layer.weight"]
    assert layer_chunks(keys) == [["embedding.word_embeddings.weight"],
                                  ["decoder.layers.2.self_attention.linear_qkv.weight",
                                   "decoder.layers.2.mlp.linear_fc2.weight"],
                                  ["decoder.layers.10.mlp.linear_fc1.weight"],
                                  ["decoder.final_layernorm.weight", "output_layer.weight"]]


def test_pack_then_unpack_is_exact():
    weights = state()
    for _, bucket in plan_chunk_buckets(chunks(weights), bucket_bytes=64):
        views = unpack(pack(weights, bucket, torch.device("cpu")), bucket)
        for name, view in views.items():
            assert view.dtype == weights[name].dtype and torch.equal(view, weights[name])
