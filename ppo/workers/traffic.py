"""What the driver sends its workers, once: a batch's fields go into Ray's object store a single time per step.

A worker call used to carry the whole batch by value to every rank, so the driver's traffic grew with the rank count
(64 copies of every batch for dsr1_7b's critic).  :class:`Shipper` puts each field (a tensor or a list) in the object
store once, however many ranks, calls and epochs read it, and sends each call one small manifest of references,
itself put once; Ray moves an object to a node once, where every rank of that node reads it.  ``bytes`` counts what
the driver put on the wire: every field once, plus each call's pickled arguments; the trainer logs it per step as
``train/driver_bytes``.  Workers call :func:`receive` on what they are given.
"""

from __future__ import annotations

import pickle
from typing import Any

import ray
import torch


class Shipper:
    """The driver's side: a batch in, a reference to its manifest out; each field put once until :meth:`new_step`."""

    def __init__(self) -> None:
        self.bytes = 0
        self._fields: dict[int, tuple[Any, ray.ObjectRef]] = {}  # id(value) -> (value, its reference)
        self._manifests: dict[tuple, ray.ObjectRef] = {}

    def new_step(self) -> None:
        """Forget this step's objects (Ray frees them once no call holds them) and start counting again."""
        self._fields.clear()
        self._manifests.clear()
        self.bytes = 0

    def _field(self, value: Any) -> ray.ObjectRef:
        key = id(value)
        if key not in self._fields:  # the value is kept with its reference, so its id cannot be reused meanwhile
            self._fields[key] = (value, ray.put(value))
            self.bytes += nbytes(value)
        return self._fields[key][1]

    def ship(self, batch: dict) -> ray.ObjectRef:
        """A reference to ``{name: field reference or scalar}``; a worker turns it back with :func:`receive`."""
        manifest = {k: self._field(v) if torch.is_tensor(v) or isinstance(v, list) else v for k, v in batch.items()}
        key = tuple(sorted((k, id(v)) for k, v in batch.items()))
        if key not in self._manifests:
            self._manifests[key] = ray.put(manifest)
            self.bytes += len(pickle.dumps(manifest))
        return self._manifests[key]

    def count_call(self, args: tuple, kwargs: dict) -> None:
        """Add one call's own arguments (references and small values), as pickled for one actor."""
        self.bytes += len(pickle.dumps((args, kwargs)))


def nbytes(value: Any) -> int:
    if torch.is_tensor(value):
        return value.numel() * value.element_size()
    return len(pickle.dumps(value))


def is_batch(value: Any) -> bool:
    return isinstance(value, dict) and "input_ids" in value


def receive(batch: Any) -> Any:
    """A worker's side: a shipped manifest (Ray has already resolved the reference to it) with its fields fetched;
    anything else as it came."""
    if not isinstance(batch, dict):
        return batch
    refs = {k: v for k, v in batch.items() if isinstance(v, ray.ObjectRef)}
    if not refs:
        return batch
    return batch | dict(zip(refs, ray.get(list(refs.values()))))
