"""The driver's traffic (``ppo/workers/traffic.py``): each field put once a step in pieces, each data-parallel rank
sent only its pieces, the whole batch rebuilt exactly where it is received, and whatever else a call sends by value
counted wherever it leaves."""

from __future__ import annotations

import pickle

import pytest
import ray
import torch

from ppo.data.batch import Batch
from ppo.workers.traffic import SHARD, Shipper, nbytes, receive


@pytest.fixture(scope="module")
def ray_local():
    from ppo.cluster.ray_runtime import init_local_ray

    init_local_ray(num_cpus=1)
    yield
    ray.shutdown()


def batch(rows: int = 10, width: int = 7) -> Batch:
    g = torch.Generator().manual_seed(0)
    return Batch(input_ids=torch.randint(0, 50, (rows, width), generator=g),
                 response_mask=(torch.rand(rows, width, generator=g) > 0.5).float(),
                 rewards=torch.rand(rows, generator=g),
                 truncated=torch.rand(rows, generator=g) > 0.5,
                 ground_truths=[str(i) for i in range(rows)])


@pytest.mark.slow
def test_a_rank_is_sent_only_its_pieces_and_the_whole_batch_comes_back(ray_local):
    b = batch()
    shipper = Shipper(pieces=4)
    manifests = [ray.get(shipper.ship(b, data=2, rank=r)) for r in range(2)]
    assert [m[SHARD]["pieces"] for m in manifests] == [[0, 2], [1, 3]]
    got = ray.get(manifests[1]["input_ids"])
    assert [t.shape[0] for t in got] == [3, 2]  # rows 1, 5, 9 and 3, 7
    torch.testing.assert_close(got[0], b.input_ids[1::4])
    whole = receive(ray.get(shipper.ship(b, data=1, rank=0)))
    assert isinstance(whole, Batch) and whole == b  # every field, its dtype and shape


def test_every_field_goes_once_whatever_the_calls_and_ranks(ray_local):
    b = batch(rows=64, width=32)
    fields = sum(nbytes(v) for v in b.fields().values())
    shipper = Shipper(pieces=4)
    for _ in range(3):  # three calls (values, logprobs, an epoch), to groups of 1, 2 and 4 data-parallel ranks
        for data in (1, 2, 4):
            for rank in range(data):
                shipper.ship(b, data=data, rank=rank)
    manifests = shipper.bytes
    assert fields <= manifests
    b.advantages = torch.zeros(64, 32)  # a field added later goes once too
    shipper.ship(b, data=2, rank=0)
    assert shipper.bytes - manifests >= 64 * 32 * 4
    by_value = 7 * len(pickle.dumps(b))  # what the 7 ranks of one call received before
    assert shipper.bytes < by_value / 3


@pytest.mark.slow
def test_a_group_whose_ranks_cannot_share_the_pieces_is_refused(ray_local):
    with pytest.raises(ValueError, match="3 data-parallel ranks cannot share 4 pieces"):
        Shipper(pieces=4).ship(batch(), data=3, rank=0)


class Taker:
    """A worker that takes whatever it is sent (the group's rendezvous arguments too)."""

    def __init__(self, **_):
        pass

    def take(self, *args, **kwargs) -> bool:
        return True

    def ready(self) -> bool:
        return True


@pytest.mark.slow
def test_a_batch_sent_by_value_counts_whichever_call_sends_it(ray_local):
    """Every call's arguments count where the call leaves, so a batch that skips the shipper shows in the bytes:
    passed to one rank, as a keyword (by value to every rank), or to an engine."""
    from ppo.rollout.generation import EnginePool
    from ppo.workers.group import WorkerGroup

    b = batch(rows=256, width=32)
    whole = sum(nbytes(v) for v in b.fields().values() if torch.is_tensor(v))
    group = WorkerGroup(Taker, world_size=2)
    try:
        group.shipper = shipper = Shipper(pieces=2)
        engines = EnginePool(group.actors, shipper=shipper)
        group.call_async(Taker.take, b).wait()
        shipped = shipper.bytes
        assert whole <= shipped < 1.2 * whole, "each field once, in pieces, and two small manifests"
        sends = {"one rank": lambda: group.call_rank_async(1, Taker.take, b),
                 "every rank, as a keyword": lambda: group.call_async(Taker.take, batch=b),
                 "an engine": lambda: engines.call_async(Taker.take, b, engines=[0])}
        copies = {"one rank": 1, "every rank, as a keyword": 2, "an engine": 1}
        for how, call in sends.items():
            before = shipper.bytes
            call().wait()
            assert shipper.bytes - before >= copies[how] * whole, how
        before = shipper.bytes
        group.call_async(Taker.take, b).wait()
        assert shipper.bytes - before < 1000, "the shipped batch again: a reference to each rank's manifest"
    finally:
        group.kill()
