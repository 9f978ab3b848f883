"""The batch a PPO step hands from phase to phase: one declared field per thing a phase knows about the samples.

Rows are ``prompt + response`` (right-padded), ``B`` of them, ``T`` columns wide.  Each field of :class:`Batch` says
its dtype, its shape (``[B]`` per sample, ``[B, T]`` per token, or a list of ``B`` strings) and the phase that sets
it; the class is the schema.  Why not a dict: a dict let a phase read a key that no phase had set yet (a
``KeyError`` far from the cause, or a silent ``None`` with ``.get``) and store a float64 or a transposed tensor that
broke a loss three calls later.  Here reading an unset field raises :class:`MissingField` naming the field and the
phase that sets it, and setting a field checks its type, dtype and shape against the batch's ``B`` and ``T``
(:class:`FieldError`, naming the field), so a mistake fails where it is made.

Fields stay unset until their phase sets them: the collection sets the rollout's, the step adds ``values``,
``logp_old``, ``advantages``, …, and a batch may hold a part of the fields only (the critic's view, the probe's
token rows), since every field is row-aligned and the row operations below apply to whatever is set.  The fields
are plain tensors and lists, so :meth:`Batch.fields` is what goes over the wire (:mod:`ppo.workers.traffic`) or
into ``torch.save``, and :meth:`Batch.from_fields` rebuilds and checks it.

This module sits below both the collection (``ppo.rollout``, which builds batches) and the workers
(``ppo.workers``, which train on them), so neither imports the other for it.  Why our own class rather than
``tensordict``'s ``TensorDict`` or verl's ``DataProto`` (built on it): those check that entries share the leading
batch dimension, not which keys exist, nor a key's dtype or rank, nor say which phase should have set a missing
key; a small descriptor class gives attribute access, those checks and the schema in one place, without another
package whose releases follow torch's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

ROWS = ("B",)
TOKENS = ("B", "T")


class FieldError(ValueError):
    """A value set on a batch field has the wrong type, dtype or shape, or names no field."""


class MissingField(AttributeError):
    """A batch field was read before the phase that sets it ran."""


class Field:
    """One declared field of :class:`Batch`: ``dtype`` (a torch dtype, or ``str`` for a list of ``B`` strings),
    ``dims`` (:data:`ROWS` or :data:`TOKENS`), ``set_by`` (the phase that sets it, for the error that reads it
    unset) and what it holds."""

    def __init__(self, dtype: torch.dtype | type, dims: tuple[str, ...], set_by: str, doc: str):
        self.dtype, self.dims, self.set_by, self.__doc__ = dtype, dims, set_by, doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, batch: Batch | None, owner: type) -> Any:
        if batch is None:
            return self
        try:
            return batch._values[self.name]
        except KeyError:
            raise MissingField(f"batch field {self.name!r} is not set: {self.set_by} sets it") from None

    def __set__(self, batch: Batch, value: Any) -> None:
        self.check(value, batch)
        batch._values[self.name] = value

    def __delete__(self, batch: Batch) -> None:
        batch._values.pop(self.name, None)

    def describe(self) -> str:
        kind = "list[str]" if self.dtype is str else str(self.dtype).removeprefix("torch.")
        return f"{kind} [{', '.join(self.dims)}]"

    def check(self, value: Any, batch: Batch) -> None:
        """Raise :class:`FieldError` unless ``value`` has this field's type, dtype and shape, and ``batch``'s ``B``
        (and ``T``) where another field already says them."""
        where = f"batch field {self.name!r} ({self.describe()})"
        if self.dtype is str:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise FieldError(f"{where}: expected a list of strings, got {type(value).__name__}")
            shape = (len(value),)
        else:
            if not torch.is_tensor(value):
                raise FieldError(f"{where}: expected a tensor, got {type(value).__name__}")
            if value.dtype != self.dtype:
                raise FieldError(f"{where}: expected dtype {self.dtype}, got {value.dtype}")
            if value.dim() != len(self.dims):
                raise FieldError(f"{where}: expected {len(self.dims)} dimensions, got shape {tuple(value.shape)}")
            shape = tuple(value.shape)
        rows, width = batch._extent(besides=self.name)
        if rows is not None and shape[0] != rows:
            raise FieldError(f"{where}: has {shape[0]} rows, the batch's other fields {rows}")
        if len(shape) == 2 and width is not None and shape[1] != width:
            raise FieldError(f"{where}: has {shape[1]} columns, the batch's other token fields {width}")


class Batch:
    """The fields of one batch of samples (see the module docstring); set, read and checked as attributes."""

    # the collection (ppo.rollout.batch.build_rollout_batch): what generation returned, one row per sample
    input_ids = Field(torch.long, TOKENS, "the rollout (build_rollout_batch)", "prompt + response token ids")
    segment_ids = Field(torch.long, TOKENS, "the rollout (build_rollout_batch)",
                        "1 on real tokens, 0 on padding (packing would use 1, 2, ...)")
    response_mask = Field(torch.float32, TOKENS, "the rollout (build_rollout_batch; the overlong filter zeroes "
                          "truncated rows)", "1 on trainable tokens (the sampled response), 0 on prompt and padding")
    logp_gen = Field(torch.float32, TOKENS, "the rollout (build_rollout_batch)",
                     "the engine's logprob of each sampled token, 0 elsewhere")
    prompt_lengths = Field(torch.long, ROWS, "the rollout (build_rollout_batch)", "prompt tokens of each row")
    response_lengths = Field(torch.long, ROWS, "the rollout (build_rollout_batch)", "response tokens of each row")
    truncated = Field(torch.bool, ROWS, "the rollout (build_rollout_batch)", "the response hit max_new_tokens")
    group_ids = Field(torch.long, ROWS, "the rollout (build_rollout_batch)",
                      "which prompt: the samples of one prompt form a group")
    policy_version = Field(torch.long, ROWS, "the rollout (build_rollout_batch with policy_version)",
                           "the policy version that generated the row: the index of the step that collected it "
                           "(the engines held the weights of the steps before it)")
    responses = Field(str, ROWS, "the rollout (build_rollout_batch)", "the decoded responses")
    ground_truths = Field(str, ROWS, "the rollout (build_rollout_batch)", "each row's reference answer")
    record_ids = Field(str, ROWS, "the rollout (build_rollout_batch)", "the dataset record each row's prompt came from")
    # the scoring and the reward shaping (ppo.rollout.collect.Collector.rollout)
    scores = Field(torch.float32, ROWS, "the scoring (Collector.rollout)", "the verifier's reward, before shaping")
    rewards = Field(torch.float32, ROWS, "the reward shaping (Collector.rollout)", "the shaped sequence reward R")
    char_credit = Field(torch.float32, TOKENS, "the reward shaping with reward_shaping.char_credit",
                        "the part of R placed on the answer's right characters")
    # the step's forward passes and the estimator (ppo.loop)
    values = Field(torch.float32, TOKENS, "the step's evaluation (the critic's values)", "V, 0 off the response mask")
    logp_old = Field(torch.float32, TOKENS, "the step's evaluation (the policy's logprobs)",
                     "the policy's logprobs before the update")
    logp_ref = Field(torch.float32, TOKENS, "the step's evaluation with a KL term (the reference's logprobs)",
                     "the frozen reference's logprobs")
    advantages = Field(torch.float32, TOKENS, "the step's estimator (estimate_advantages)", "the advantages")
    returns = Field(torch.float32, TOKENS, "the step's estimator with a critic (GAE)", "the critic's targets")
    # the critic's view with critic.reference_answer (ppo.rollout.critic_view)
    prefix_lengths = Field(torch.long, ROWS, "the critic's view with critic.reference_answer",
                           "how far each row moved right for its reference-answer prefix")

    __slots__ = ("_values",)

    def __init__(self, **fields: Any):
        self._values: dict[str, Any] = {}
        self.update(fields)

    @classmethod
    def field(cls, name: str) -> Field:
        """The declared field ``name``; :class:`FieldError` for a name that is none."""
        found = cls.__dict__.get(name)
        if not isinstance(found, Field):
            raise FieldError(f"a batch has no field {name!r} (fields: {', '.join(cls.names())})")
        return found

    @classmethod
    def names(cls) -> list[str]:
        return [name for name, value in vars(cls).items() if isinstance(value, Field)]

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Batch:
        """A batch of ``fields`` (what :meth:`fields` gave, after a trip through Ray or ``torch.save``), checked."""
        return cls(**fields)

    def update(self, fields: Mapping[str, Any]) -> None:
        """Set each of ``fields`` (checked, in order)."""
        for name, value in fields.items():
            setattr(self, self.field(name).name, value)

    def fields(self) -> dict[str, Any]:
        """The fields set, by name (the same tensor and list objects, not copies)."""
        return dict(self._values)

    def has(self, name: str) -> bool:
        """Whether field ``name`` is set (for the fields a configuration may leave unset: ``values`` without a
        critic, ``logp_ref`` without a KL term, ...)."""
        return self.field(name).name in self._values

    def get(self, name: str) -> Any:
        """Field ``name``, or None when it is not set."""
        return self._values.get(self.field(name).name)

    def only(self, *names: str) -> Batch:
        """A batch of these fields alone (the same objects)."""
        return Batch(**{name: getattr(self, self.field(name).name) for name in names})

    @property
    def rows(self) -> int:
        """``B``: the number of samples."""
        rows, _ = self._extent()
        if rows is None:
            raise MissingField("an empty batch has no rows: the rollout (build_rollout_batch) sets its fields")
        return rows

    @property
    def width(self) -> int:
        """``T``: the columns of the token fields."""
        _, width = self._extent()
        if width is None:
            raise MissingField("a batch without token fields has no width: the rollout (build_rollout_batch) sets "
                               "input_ids")
        return width

    def _extent(self, besides: str = "") -> tuple[int | None, int | None]:
        rows = width = None
        for name, value in self._values.items():
            if name == besides:
                continue
            rows = len(value)
            if torch.is_tensor(value) and value.dim() == 2:
                return rows, value.shape[1]
        return rows, width

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Batch) or self._values.keys() != other._values.keys():
            return False
        return all(_same(value, other._values[name]) for name, value in self._values.items())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return Batch.from_fields, (self._values,)

    def __repr__(self) -> str:
        parts = [f"{name}={tuple(v.shape) if torch.is_tensor(v) else f'[{len(v)} str]'}"
                 for name, v in self._values.items()]
        return f"Batch({', '.join(parts)})"

    def to(self, device: torch.device) -> Batch:
        """The batch with its tensors on ``device`` (the worker's GPU; on the CPU the same tensors)."""
        return Batch(**{k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v
                        for k, v in self._values.items()})


def _same(a: Any, b: Any) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b.to(a.device)))
    return a == b


def select(batch: Batch, index: torch.Tensor | Sequence[int]) -> Batch:
    """The rows ``index`` of every field."""
    index = torch.as_tensor(index, dtype=torch.long)
    positions = index.tolist()
    return Batch(**{key: value[index] if torch.is_tensor(value) else [value[i] for i in positions]
                    for key, value in batch.fields().items()})


def concat(batches: Sequence[Batch]) -> Batch:
    """Stack batches row-wise, padding token fields to the widest with 0 (padding: 0, segment 0); every batch must
    set the same fields."""
    names = list(batches[0].fields())
    for b in batches[1:]:
        if list(b.fields()) != names:
            raise FieldError(f"concat: batches set different fields ({names} and {list(b.fields())})")
    width = max(b.width for b in batches)
    out = {}
    for key in names:
        values = [b.fields()[key] for b in batches]
        if torch.is_tensor(values[0]) and values[0].dim() == 2:
            out[key] = torch.cat([torch.nn.functional.pad(v, (0, width - v.shape[1])) for v in values])
        elif torch.is_tensor(values[0]):
            out[key] = torch.cat(values)
        else:
            out[key] = [x for v in values for x in v]
    return Batch(**out)


def _map_token_fields(batch: Batch, fn) -> Batch:
    return Batch(**{k: fn(k, v) if torch.is_tensor(v) and v.dim() == 2 else v for k, v in batch.fields().items()})


def trim(batch: Batch) -> Batch:
    """Drop trailing all-padding columns (after selecting rows, the widest row may be shorter)."""
    width = int(batch.segment_ids.ne(0).sum(-1).max())
    return _map_token_fields(batch, lambda _, v: v[:, :width])


def pad_width(batch: Batch, multiple: int, *, pad_id: int = 0) -> Batch:
    """The batch with every ``[B, T]`` field right-padded to the next multiple of ``multiple`` columns.

    Why: Megatron's sequence parallelism splits each micro-batch's sequence over the tensor-parallel ranks (after
    the embedding, around the norms and dropout), so it asserts that ``T`` divides by TP; :func:`trim` cuts a
    micro-batch to its longest row, an arbitrary width.  verl pads each micro-batch the same way, to a multiple of
    ``TP × CP`` (with context parallelism and its load-balanced split into ``2·CP`` chunks it would be
    ``2·TP·CP``; the workers refuse context parallelism, see :class:`ppo.models.parallel.ParallelConfig`).

    The new columns are padding: ``segment_ids`` 0, so attention masks them and they score nothing, ``input_ids``
    ``pad_id``, and 0 in every other token field (``response_mask``, ``logp_*``, ``values``, ``advantages``, …), so
    losses and counts over masks are unchanged.  Per-sample fields and lists are left as they are.  A no-op when
    ``T`` already divides by ``multiple`` (and for ``multiple == 1``).
    """
    if multiple < 1:
        raise ValueError(f"pad_width: multiple must be >= 1, got {multiple}")
    extra = -batch.width % multiple
    if extra == 0:
        return batch
    return _map_token_fields(batch, lambda key, v: torch.nn.functional.pad(
        v, (0, extra), value=pad_id if key == "input_ids" else 0))


def to_device(values: dict, device: torch.device) -> dict:
    """``values`` (a dict of tensors and other things) with its tensors on ``device``."""
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in values.items()}
