"""What the driver sends its workers: each data-parallel rank only its share of a batch, each field once a step.

A worker call used to carry the whole batch by value to every rank, so the driver's traffic grew with the rank count
(64 copies of every batch for dsr1_7b's critic).  :class:`Shipper` cuts every row field of a batch (a ``[B, ...]``
tensor or a list of ``B`` items) into ``pieces`` interleaved pieces (piece *p* holds rows ``p, p + pieces, ...``)
and puts each piece in Ray's object store once a step, however many calls and epochs read it.  Data-parallel rank
*r* of a group of ``D`` ranks is sent a manifest naming the pieces ``p ≡ r (mod D)`` (``pieces`` is a multiple of
every group's ``D``), one manifest shared by its tensor-parallel peers; the ranks then rebuild the whole batch by
exchanging their pieces among themselves (:func:`receive`: an all-gather over the data-parallel group, worker to
worker), so every number they compute is the one the whole batch gives (the minibatch shuffles see every row).

``bytes`` counts what the driver put on the wire: every piece once, every manifest once, and the pickled arguments of
every call it makes to a worker.  Those are counted where every call leaves (:func:`send`, which the worker groups'
and the engine pool's calls go through), not where a batch is shipped, so a batch sent by value, whichever way it
went, shows; the trainer logs the count per step as ``train/driver_bytes``.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import ray
import torch

from ppo.cluster.deadline import get_within
from ppo.data.batch import Batch

SHARD = "_shard"  # a manifest's key: {"pieces": [...], "of": pieces, "rows": B, "data": D}


class Shipper:
    """The driver's side: a batch in, a reference to one rank's manifest out; every piece put once until
    :meth:`new_step`."""

    def __init__(self, pieces: int = 1) -> None:
        if pieces < 1:
            raise ValueError(f"pieces must be >= 1, got {pieces}")
        self.pieces = pieces
        self.bytes = 0
        self._fields: dict[int, tuple[Any, list]] = {}  # id(value) -> (value, a reference per piece)
        self._manifests: dict[tuple, ray.ObjectRef] = {}

    def new_step(self) -> None:
        """Forget this step's objects (Ray frees them once no call holds them) and start counting again."""
        self._fields.clear()
        self._manifests.clear()
        self.bytes = 0

    def _pieces(self, value: Any) -> list:
        key = id(value)
        if key not in self._fields:  # the value is kept with its references, so its id cannot be reused meanwhile
            parts = [value[p :: self.pieces] for p in range(self.pieces)]
            self._fields[key] = (value, [ray.put(part) for part in parts])
            self.bytes += sum(nbytes(part) for part in parts)
        return self._fields[key][1]

    def ship(self, batch: Batch, data: int = 1, rank: int = 0) -> ray.ObjectRef:
        """A reference to data-parallel rank ``rank``'s manifest (of ``data`` ranks); :func:`receive` reads it."""
        if self.pieces % data:
            raise ValueError(f"a group of {data} data-parallel ranks cannot share {self.pieces} pieces")
        fields = batch.fields()
        key = (tuple(sorted((k, id(v)) for k, v in fields.items())), data, rank)
        if key not in self._manifests:
            rows = batch.rows
            mine = list(range(rank, self.pieces, data))
            manifest = {SHARD: {"pieces": mine, "of": self.pieces, "rows": rows, "data": data}}
            for name, value in fields.items():
                whole = self._pieces(value) if is_row_field(value, rows) else None
                manifest[name] = value if whole is None else [whole[p] for p in mine]
            self._manifests[key] = ray.put(manifest)
            self.bytes += pickled_size(manifest)
        return self._manifests[key]

    def count_call(self, args: tuple, kwargs: dict) -> None:
        """Add one call's arguments, as pickled for one actor (a batch sent by value counts whole)."""
        self.bytes += pickled_size((args, kwargs))


def send(actor_method: ray.actor.ActorMethod, args: tuple, kwargs: dict, meter: Shipper | None = None
         ) -> ray.ObjectRef:
    """Start ``actor_method`` (an actor handle's method, which a façade picks) with these arguments, counting them in
    ``meter`` (None: not counted).  Every call from the driver to a worker leaves through here, from the façades
    (:class:`ppo.workers.group.WorkerGroup`, :class:`ppo.rollout.generation.EnginePool`)."""
    if meter is not None:
        meter.count_call(args, kwargs)
    return actor_method.remote(*args, **kwargs)


class _RefsAsIds(pickle.Pickler):
    """Pickles object references and actor handles as their IDs, about what they take on the wire, without
    going through Ray's own reducers (which register the reference as passed on)."""

    def persistent_id(self, obj: Any) -> bytes | None:
        if isinstance(obj, ray.ObjectRef):
            return obj.binary()
        if isinstance(obj, ray.actor.ActorHandle):
            return obj._actor_id.binary()
        return None


def pickled_size(value: Any) -> int:
    """Bytes of ``value`` pickled, object references counted as their IDs."""
    out = io.BytesIO()
    _RefsAsIds(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.tell()


def is_row_field(value: Any, rows: int) -> bool:
    return (torch.is_tensor(value) and value.dim() > 0 and value.shape[0] == rows) or (
        isinstance(value, list) and len(value) == rows)


def nbytes(value: Any) -> int:
    if torch.is_tensor(value):
        return value.numel() * value.element_size()
    return pickled_size(value)


def is_batch(value: Any) -> bool:
    return isinstance(value, Batch)


def receive(batch: Any, data_group=None) -> Any:
    """A worker's side: the whole :class:`ppo.data.batch.Batch` from a manifest (Ray has resolved the reference to
    it): this rank's pieces fetched from the object store, the others' gathered from the data-parallel peers
    (``data_group``); anything that is not a manifest (a batch sent by value) as it came."""
    if not isinstance(batch, dict) or SHARD not in batch:
        return batch
    shard = batch[SHARD]
    names = [k for k, v in batch.items() if k != SHARD and isinstance(v, list) and v
             and isinstance(v[0], ray.ObjectRef)]
    refs = [ref for name in names for ref in batch[name]]
    # no deadline of its own: the driver's wait on this call bounds it (the pieces were put before the call left)
    fetched = get_within(refs, None, [f"piece {i}" for i in range(len(refs))], "this rank's pieces")
    count = len(shard["pieces"])
    mine = {"pieces": shard["pieces"]} | {name: fetched[i * count : (i + 1) * count] for i, name in enumerate(names)}
    everyone = [mine]
    if shard["data"] > 1:
        everyone = [None] * shard["data"]
        torch.distributed.all_gather_object(everyone, mine, group=data_group)
    whole = {k: v for k, v in batch.items() if k != SHARD and k not in names}
    stride, rows = shard["of"], shard["rows"]
    for name in names:
        first = mine[name][0]
        if torch.is_tensor(first):
            out = torch.empty((rows, *first.shape[1:]), dtype=first.dtype)
        else:
            out = [None] * rows
        for part in everyone:
            for p, piece in zip(part["pieces"], part[name]):
                out[p::stride] = piece
        whole[name] = out
    return Batch.from_fields(whole)
