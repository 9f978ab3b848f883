"""The synthetic arithmetic task that the CPU recipes train on: ``12+34=`` → ``46``.

A problem is ``num_operands`` integers of ``digits`` digits joined by operators drawn from ``operations`` (``+``,
``-``), evaluated left to right; the ground truth is the result as a plain integer string, so the same math verifier
that grades GSM8K grades it. Operands are zero-padded to ``digits`` digits by default (``05+07=``): the probe in
``notes/tiny-task-probe.md`` used that, and a fixed layout lets a tiny model find the digits by position.

Held-out problems are disjoint from training problems by construction: a problem belongs to the held-out split when
a hash of its text falls below ``heldout_fraction``. The partition depends only on the problem, never on a seed or
on how many problems were asked for, so held-out accuracy always measures problems the policy cannot have trained on,
and every seed and run evaluates on the same part of the problem space.

``reverse_answer=True`` asks for the result least significant digit first (``12+39=`` → ``15`` for 51, a minus
sign still in front). Each answer digit then depends only on the operand digits at its place and the carry from the
digit before it, so a partial answer can be judged digit by digit: a value model can see that ``12+39=4`` is already
wrong. Problems whose result ends in 0 are left out in this mode, so that no reversed answer begins with a 0 that the
math verifier, which compares numbers, would let the policy drop.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass

from ppo.data.records import DatasetError, Record

ALPHABET = "0123456789+-="
"""Every character a problem or an answer can contain (the answer of a subtraction can be negative)."""

SPLITS = ("train", "heldout")

_ENUMERATE_BELOW = 4
"""Enumerate the whole problem space when it is smaller than this many times the number of problems asked for;
rejection sampling would waste most draws on repeats there."""


@dataclass(frozen=True)
class ArithmeticTask:
    """The task's difficulty: how many digits per operand, how many operands, which operators.

    ``allow_negative=False`` skips problems whose result is negative (only possible with ``-``), so answers stay
    within the digits-only part of the alphabet.
    """

    digits: int = 2
    num_operands: int = 2
    operations: str = "+"
    pad_operands: bool = True
    heldout_fraction: float = 0.1
    allow_negative: bool = True
    reverse_answer: bool = False

    def __post_init__(self) -> None:
        if self.digits < 1:
            raise ValueError(f"digits must be >= 1, got {self.digits}")
        if self.num_operands < 2:
            raise ValueError(f"num_operands must be >= 2, got {self.num_operands}")
        if not self.operations or set(self.operations) - set("+-") or len(set(self.operations)) != len(self.operations):
            raise ValueError(f"operations must be distinct characters from '+-', got {self.operations!r}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction}")

    @property
    def space_size(self) -> int:
        """How many distinct problems the task can pose (before the split and the sign filter)."""
        return (10**self.digits) ** self.num_operands * len(self.operations) ** (self.num_operands - 1)

    def text(self, operands: tuple[int, ...], operators: tuple[str, ...]) -> str:
        width = self.digits if self.pad_operands else 0
        parts = [f"{operands[0]:0{width}d}"]
        for op, operand in zip(operators, operands[1:]):
            parts.append(f"{op}{operand:0{width}d}")
        return "".join(parts) + "="

    @staticmethod
    def evaluate(operands: tuple[int, ...], operators: tuple[str, ...]) -> int:
        result = operands[0]
        for op, operand in zip(operators, operands[1:]):
            result = result + operand if op == "+" else result - operand
        return result

    def answer_text(self, answer: int) -> str:
        """The ground truth as the policy must write it: the integer, its digits reversed when ``reverse_answer``."""
        if not self.reverse_answer:
            return str(answer)
        return ("-" if answer < 0 else "") + str(abs(answer))[::-1]

    def split_of(self, text: str) -> str:
        """``"heldout"`` or ``"train"``, from a hash of the problem's text (stable across processes and machines)."""
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        return "heldout" if int.from_bytes(digest, "big") / 2**64 < self.heldout_fraction else "train"

    def _record(self, operands: tuple[int, ...], operators: tuple[str, ...], split: str) -> Record | None:
        text = self.text(operands, operators)
        if self.split_of(text) != split:
            return None
        answer = self.evaluate(operands, operators)
        if answer < 0 and not self.allow_negative:
            return None
        if self.reverse_answer and answer % 10 == 0:
            return None
        return Record(
            prompt=text,
            ground_truth=self.answer_text(answer),
            id=f"arithmetic/{text}",
            metadata={"source": "arithmetic", "split": split, "operands": list(operands), "operators": list(operators)},
        )

    def all_problems(self, split: str) -> list[Record]:
        """Every problem of ``split``, in enumeration order (for small problem spaces)."""
        numbers = range(10**self.digits)
        records = []
        for operators in itertools.product(self.operations, repeat=self.num_operands - 1):
            for operands in itertools.product(numbers, repeat=self.num_operands):
                record = self._record(operands, operators, split)
                if record is not None:
                    records.append(record)
        return records

    def generate(self, split: str, size: int, seed: int = 0) -> list[Record]:
        """``size`` distinct problems of ``split`` ("train" or "heldout"), the same for the same task and seed.

        Raises :class:`DatasetError` when the split holds fewer than ``size`` problems (e.g. asking for 2000
        held-out one-digit sums).
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        import numpy as np  # here, not at import: the dry run imports this module and never draws a problem

        rng = np.random.default_rng([seed, SPLITS.index(split)])
        split_share = self.heldout_fraction if split == "heldout" else 1.0 - self.heldout_fraction
        if self.space_size * split_share < _ENUMERATE_BELOW * size:
            pool = self.all_problems(split)
            if len(pool) < size:
                raise DatasetError(
                    f"the arithmetic task {self} has only {len(pool)} {split} problems; asked for {size}"
                )
            return [pool[i] for i in rng.permutation(len(pool))[:size]]

        records: list[Record] = []
        seen: set[str] = set()
        high = 10**self.digits
        ops = np.array(list(self.operations))
        budget = 100 * size + 100_000
        while len(records) < size:
            if budget <= 0:
                raise DatasetError(
                    f"found only {len(records)} distinct {split} problems of {self} in {100 * size + 100_000} draws; "
                    f"asked for {size} (with allow_negative=False most multi-operand subtractions are rejected)"
                )
            draws = max(64, 2 * (size - len(records)))
            budget -= draws
            operand_draws = rng.integers(0, high, size=(draws, self.num_operands))
            operator_draws = rng.choice(ops, size=(draws, self.num_operands - 1))
            for operands, operators in zip(operand_draws.tolist(), operator_draws.tolist()):
                record = self._record(tuple(operands), tuple(operators), split)
                if record is None or record.prompt in seen:
                    continue
                seen.add(record.prompt)
                records.append(record)
                if len(records) == size:
                    break
        return records
