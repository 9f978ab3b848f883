"""A deterministic, resumable loader of prompt batches: an endless sequence of epochs, each a seeded shuffle.

Epoch ``e`` visits the records in the order ``numpy.random.default_rng([seed, e]).permutation(n)``. Seeding with the
pair (not ``seed + e``) keeps runs with neighbouring seeds from sharing shifted epoch orders.

The final partial batch of an epoch is dropped by default (``drop_last=True``): every step then holds exactly
``prompts_per_step`` prompts, which the batch-divisibility checks made at config time rely on (prompts × generations
split into PPO minibatches and data-parallel ranks). Nothing is lost for good: each epoch is shuffled afresh, so a
different tail is left out each time. ``drop_last=False`` yields the short batch instead.

The position is ``(epoch, position)``: the epoch and the index, in that epoch's order, of the next record. After the
last batch of an epoch it is normalised to ``(epoch + 1, 0)``, so a checkpoint taken at an epoch boundary has a
single meaning and a resumed run neither repeats nor skips an epoch. ``state_dict()`` also records what determines
the order (seed, number of records, batch size, shuffle, drop_last); loading a state made under different values is
an error, because the resumed sequence would silently differ from the interrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import numpy as np


T = TypeVar("T")


class PromptLoader(Generic[T]):
    """Batches of ``prompts_per_step`` items from ``records``, epoch after epoch, forever.

    Iterate it (``for batch in loader``) or call :meth:`next_batch`; the trainer takes as many steps as it needs.
    """

    def __init__(
        self,
        records: Sequence[T],
        prompts_per_step: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = True,
    ) -> None:
        if prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {prompts_per_step}")
        if not records:
            raise ValueError("the loader has no records")
        if drop_last and len(records) < prompts_per_step:
            raise ValueError(
                f"prompts_per_step={prompts_per_step} is larger than the dataset ({len(records)} records): "
                "with drop_last=True no batch could be formed"
            )
        self.records = records
        self.prompts_per_step = prompts_per_step
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.position = 0
        self._cached_order: tuple[int, np.ndarray] | None = None

    @property
    def steps_per_epoch(self) -> int:
        full, rest = divmod(len(self.records), self.prompts_per_step)
        return full + (1 if rest and not self.drop_last else 0)

    @property
    def step(self) -> int:
        """Batches served since the start (over all epochs, including those before a resume)."""
        return self.epoch * self.steps_per_epoch + self.position // self.prompts_per_step

    def order(self, epoch: int) -> np.ndarray:
        """The indices of ``records`` in the order epoch ``epoch`` visits them."""
        if self._cached_order is None or self._cached_order[0] != epoch:
            n = len(self.records)
            import numpy as np  # here, not at import: the dry run imports this module and shuffles nothing

            order = np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)
            self._cached_order = (epoch, order)
        return self._cached_order[1]

    def next_batch(self) -> list[T]:
        indices = self.order(self.epoch)[self.position : self.position + self.prompts_per_step]
        batch = [self.records[i] for i in indices.tolist()]
        self.position += len(batch)
        remaining = len(self.records) - self.position
        if remaining == 0 or (self.drop_last and remaining < self.prompts_per_step):
            self.epoch += 1
            self.position = 0
        return batch

    def __iter__(self) -> Iterator[list[T]]:
        while True:
            yield self.next_batch()

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "num_records": len(self.records),
            "prompts_per_step": self.prompts_per_step,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mine = self.state_dict()
        for key in ("seed", "num_records", "prompts_per_step", "shuffle", "drop_last"):
            if state.get(key) != mine[key]:
                raise ValueError(
                    f"cannot resume the prompt loader: the checkpoint has {key}={state.get(key)!r}, "
                    f"this run has {key}={mine[key]!r} (the batch sequence would differ)"
                )
        epoch, position = int(state["epoch"]), int(state["position"])
        if epoch < 0 or not 0 <= position < len(self.records) or position % self.prompts_per_step:
            raise ValueError(f"cannot resume the prompt loader: invalid position epoch={epoch}, position={position}")
        self.epoch, self.position = epoch, position


def batched(records: Sequence[T], batch_size: int) -> Iterator[list[T]]:
    """Every record once, in order, the last batch possibly short: for evaluation sets, where nothing may be dropped."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for start in range(0, len(records), batch_size):
        yield list(records[start : start + batch_size])
