"""The driver's traffic (``ppo/workers/traffic.py``): each field put once a step in pieces, each data-parallel rank
sent only its pieces, and the whole batch rebuilt exactly where it is received."""

from __future__ import annotations

import pickle

import pytest
import ray
import torch

from ppo.workers.traffic import SHARD, Shipper, nbytes, receive


@pytest.fixture(scope="module")
def ray_local():
    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray(num_cpus=1)
    yield
    ray.shutdown()


def batch(rows: int = 10, width: int = 7) -> dict:
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, 50, (rows, width), generator=g),
            "response_mask": (torch.rand(rows, width, generator=g) > 0.5).float(),
            "rewards": torch.rand(rows, generator=g),
            "ground_truths": [str(i) for i in range(rows)],
            "temperature": 0.7}


@pytest.mark.slow
def test_a_rank_is_sent_only_its_pieces_and_the_whole_batch_comes_back(ray_local):
    b = batch()
    shipper = Shipper(pieces=4)
    manifests = [ray.get(shipper.ship(b, data=2, rank=r)) for r in range(2)]
    assert [m[SHARD]["pieces"] for m in manifests] == [[0, 2], [1, 3]]
    got = ray.get(manifests[1]["input_ids"])
    assert [t.shape[0] for t in got] == [3, 2]  # rows 1, 5, 9 and 3, 7
    torch.testing.assert_close(got[0], b["input_ids"][1::4])
    whole = receive(ray.get(shipper.ship(b, data=1, rank=0)))
    assert whole.keys() == b.keys()
    for key, value in b.items():
        if torch.is_tensor(value):
            assert torch.equal(whole[key], value), key
        else:
            assert whole[key] == value, key


def test_every_field_goes_once_whatever_the_calls_and_ranks(ray_local):
    b = batch(rows=64, width=32)
    fields = sum(nbytes(v) for v in b.values() if not isinstance(v, float))
    shipper = Shipper(pieces=4)
    for _ in range(3):  # three calls (values, logprobs, an epoch), to groups of 1, 2 and 4 data-parallel ranks
        for data in (1, 2, 4):
            for rank in range(data):
                shipper.ship(b, data=data, rank=rank)
    manifests = shipper.bytes
    assert fields <= manifests
    b["advantages"] = torch.zeros(64, 32)  # a field added later goes once too
    shipper.ship(b, data=2, rank=0)
    assert shipper.bytes - manifests >= 64 * 32 * 4
    by_value = 7 * len(pickle.dumps(b))  # what the 7 ranks of one call received before
    assert shipper.bytes < by_value / 3


@pytest.mark.slow
def test_a_group_whose_ranks_cannot_share_the_pieces_is_refused(ray_local):
    with pytest.raises(ValueError, match="3 data-parallel ranks cannot share 4 pieces"):
        Shipper(pieces=4).ship(batch(), data=3, rank=0)
