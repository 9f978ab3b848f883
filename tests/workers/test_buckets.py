"""The refit's byte buckets: planned in order within the size, packed and viewed back bit for bit."""

from __future__ import annotations

import torch

from ppo.workers.buckets import bucket_size, pack, plan_buckets, unpack


def state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a": torch.randn(3, 4, generator=g),  # 48 bytes
            "b": torch.randn(5, generator=g).to(torch.bfloat16),  # 10 bytes
            "big": torch.randn(40, generator=g),  # 160 bytes: over the bucket size, a bucket of its own
            "c": torch.arange(6, dtype=torch.int64).reshape(2, 3)}  # 48 bytes


def test_buckets_keep_order_and_size():
    buckets = plan_buckets(state(), bucket_bytes=64)
    assert [[e.name for e in b] for b in buckets] == [["a", "b"], ["big"], ["c"]]
    assert [bucket_size(b) for b in buckets] == [58, 160, 48]
    assert [e.offset for e in buckets[0]] == [0, 48]


def test_pack_then_unpack_is_exact():
    weights = state()
    for bucket in plan_buckets(weights, bucket_bytes=64):
        views = unpack(pack(weights, bucket, torch.device("cpu")), bucket)
        for name, view in views.items():
            assert view.dtype == weights[name].dtype and torch.equal(view, weights[name])
