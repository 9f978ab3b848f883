"""Training tasks as experiment components: which records, which prompt template, which tokenizer for new models.

A task gives the trainer train and validation records (``ppo.data.Record``), the prompt template, and — for
models the run creates itself (``ppo.models.sources.TinyRandomModel``) — the tokenizer to build.

``check()`` checks the settings alone; ``missing_paths()`` lists the data files that are not on this machine, one
line each (a GPU recipe's files live on the cluster; see ``Experiment.missing_paths``); ``check_columns()`` reads the
ones that are here and refuses, in one line, a file without a column its loader needs.

A data path may be a hub dataset instead (``openai/gsm8k:main:train``, :mod:`ppo.data.hub`): the fields that may
name one are the spec's ``HUB_FIELDS``.  The launcher fetches them into ``PPO_DATA_ROOT`` and the run reads the
fetched files (:mod:`ppo.launch.fetch`), so ``missing_paths()`` leaves hub ids out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ppo.data import DAPO_MATH_TEMPLATE, ArithmeticTask, PromptTemplate, load_aime2024, load_dapo_math, load_gsm8k
from ppo.data.aime import check_aime2024_columns
from ppo.data.arithmetic import ALPHABET
from ppo.data.dapo import check_dapo_math_columns
from ppo.data.gsm8k import check_gsm8k_columns
from ppo.data.hub import dataset_file, parse_dataset_id
from ppo.data.records import DatasetError, Record


class _GeneratedArithmetic:
    """What the arithmetic tasks share: the bare prompt, the character tokenizer, no files."""

    one_token_per_character = True  # what reward_shaping.char_credit needs

    def template(self) -> PromptTemplate:
        return PromptTemplate("{prompt}")

    def build_tokenizer(self):
        from ppo.data.tokenizer import build_arithmetic_tokenizer

        return build_arithmetic_tokenizer()

    def vocab_size(self) -> int | None:
        """Tokens of :meth:`build_tokenizer`'s vocabulary (``<pad> <eos> <bos>`` and the alphabet), without building
        it."""
        return 3 + len(ALPHABET)

    def missing_paths(self) -> list[str]:
        return []  # generated


@dataclass
class ArithmeticTaskSpec(_GeneratedArithmetic):
    """The synthetic CPU task (``12+34=`` → ``46``), a character tokenizer, answers graded by the math verifier.

    ``reverse_answer=True``: answers least significant digit first (``12+34=`` → ``64``), which a value model can judge
    digit by digit (see ``ppo.data.arithmetic``).
    """

    digits: int = 2
    num_operands: int = 2
    operations: str = "+"
    train_size: int = 8000
    val_size: int = 256
    seed: int = 0
    reverse_answer: bool = False

    def _task(self) -> ArithmeticTask:
        return ArithmeticTask(digits=self.digits, num_operands=self.num_operands, operations=self.operations,
                              reverse_answer=self.reverse_answer)

    def train_records(self):
        return self._task().generate("train", self.train_size, seed=self.seed)

    def val_records(self):
        return self._task().generate("heldout", self.val_size, seed=self.seed)

    def max_answer_tokens(self) -> int:
        return self.digits + len(str(self.num_operands)) + 2

    def check(self) -> None:
        self._task()


_ENUMERATE_UP_TO = 10_000
"""Problem spaces up to this size are counted by enumeration to find out whether a size has too few problems."""


@dataclass
class MixedArithmeticTaskSpec(_GeneratedArithmetic):
    """Sums of several sizes in one stream (``3+4=``, ``12+34=``, ``123+456=``), so that how hard a prompt is — and
    so its value — can be read off the prompt.

    ``weights[i]`` is the share of ``digits[i]``-digit problems in the training stream and in the held-out set. A
    size with fewer distinct problems than its share (one-digit sums: 100 in all, about 90 of them in the training
    split) repeats them; held-out problems always come from the held-out split of their size, so they are never
    trained on. Each record carries ``metadata["group"]`` (``"2-digit"``), and validation reports
    ``validation/accuracy/<group>`` beside the overall accuracy.
    """

    digits: tuple[int, ...] = (1, 2, 3)
    weights: tuple[float, ...] = (0.25, 0.6, 0.15)
    num_operands: int = 2
    operations: str = "+"
    train_size: int = 8000
    val_size: int = 256
    seed: int = 0

    def check(self) -> None:
        if len(self.digits) != len(self.weights) or not self.digits:
            raise ValueError(f"task.digits {self.digits} and task.weights {self.weights} must be non-empty and of "
                             "the same length")
        if len(set(self.digits)) != len(self.digits):
            raise ValueError(f"task.digits must be distinct, got {self.digits}")
        if any(w <= 0 for w in self.weights):
            raise ValueError(f"task.weights must be > 0, got {self.weights}")
        for digits in self.digits:
            self._task(digits)

    def _task(self, digits: int) -> ArithmeticTask:
        return ArithmeticTask(digits=digits, num_operands=self.num_operands, operations=self.operations)

    def _counts(self, total: int) -> list[int]:
        """Records per size: ``total`` split by the weights, the rounding remainder to the largest shares."""
        shares = [w / sum(self.weights) * total for w in self.weights]
        counts = [int(share) for share in shares]
        for i in sorted(range(len(shares)), key=lambda i: counts[i] - shares[i])[: total - sum(counts)]:
            counts[i] += 1
        return counts

    def _records(self, split: str, total: int) -> list[Record]:
        records = []
        for digits, count in zip(self.digits, self._counts(total)):
            if count == 0:
                continue
            task = self._task(digits)
            available = len(task.all_problems(split)) if task.space_size <= _ENUMERATE_UP_TO else count
            pool = task.generate(split, min(count, available), seed=self.seed)
            group = f"{digits}-digit"
            records += [Record(r.prompt, r.ground_truth, r.id, {**r.metadata, "group": group})
                        for r in (pool[i % len(pool)] for i in range(count))]
        return records

    def train_records(self):
        return self._records("train", self.train_size)

    def val_records(self):
        return self._records("heldout", self.val_size)


@dataclass
class GSM8KTaskSpec:
    """GSM8K from its jsonl files; ``val_size`` rows of the test split for validation.

    ``use_chat_template=True`` makes the formatted prompt the user turn of the model's chat template (instruction-
    tuned checkpoints); the default is the plain text, which the project's own tokenizers need.
    """

    HUB_FIELDS = {"train_path": "dataset", "test_path": "dataset"}

    train_path: str = ""
    test_path: str = ""
    val_size: int = 128
    train_limit: int | None = None
    template_text: str = "Question: {prompt}\nAnswer:"
    tokenizer_vocab_size: int = 1024
    use_chat_template: bool = False

    def check(self) -> None:
        _require_paths("GSM8K", train_path=self.train_path, test_path=self.test_path)
        self.template()
        if self.val_size < 1:
            raise ValueError(f"task.val_size must be >= 1, got {self.val_size}")

    def missing_paths(self) -> list[str]:
        return _missing_files("GSM8K", self.train_path, self.test_path)

    def check_columns(self) -> None:
        _check_columns(check_gsm8k_columns, train_path=self.train_path, test_path=self.test_path)

    def train_records(self):
        return load_gsm8k(self.train_path, limit=self.train_limit)

    def val_records(self):
        return load_gsm8k(self.test_path, limit=self.val_size)

    def template(self) -> PromptTemplate:
        return PromptTemplate(self.template_text, use_chat_template=self.use_chat_template)

    def build_tokenizer(self):
        from ppo.data.tokenizer import build_gsm8k_tokenizer

        return build_gsm8k_tokenizer(self.train_path, vocab_size=self.tokenizer_vocab_size)


@dataclass
class DAPOMathTaskSpec:
    """DAPO-Math-17k for training, AIME 2024 for validation (see :mod:`ppo.data.dapo`, :mod:`ppo.data.aime`).

    The training prompts already carry DAPO's instruction ("... Answer: $Answer ..."), so the template is the bare
    prompt; validation problems in a plain AIME layout get the same instruction (``DAPO_MATH_TEMPLATE``) so the
    policy is asked the way it was trained, while DAPO's own AIME export, already wrapped, is used as it is.
    ``val_size`` keeps the first problems (``None``: all 30).
    """

    HUB_FIELDS = {"train_path": "dataset", "val_path": "dataset"}

    train_path: str = ""
    val_path: str = ""
    train_limit: int | None = None
    val_size: int | None = None
    use_chat_template: bool = True

    def check(self) -> None:
        _require_paths("DAPO-Math", train_path=self.train_path, val_path=self.val_path)
        if self.val_size is not None and self.val_size < 1:
            raise ValueError(f"task.val_size must be >= 1 or None, got {self.val_size}")

    def missing_paths(self) -> list[str]:
        return _missing_files("DAPO-Math", self.train_path) + _missing_files("AIME 2024", self.val_path)

    def check_columns(self) -> None:
        _check_columns(check_dapo_math_columns, train_path=self.train_path)
        _check_columns(check_aime2024_columns, val_path=self.val_path)

    def train_records(self):
        return load_dapo_math(self.train_path, limit=self.train_limit)

    def val_records(self):
        return [_with_dapo_instruction(r) for r in load_aime2024(self.val_path)[: self.val_size]]

    def template(self) -> PromptTemplate:
        return PromptTemplate("{prompt}", use_chat_template=self.use_chat_template)


_DAPO_INSTRUCTION = DAPO_MATH_TEMPLATE.split("{prompt}")[0].strip()


def _with_dapo_instruction(record: Record) -> Record:
    if _DAPO_INSTRUCTION in record.prompt:
        return record
    return Record(DAPO_MATH_TEMPLATE.format(prompt=record.prompt), record.ground_truth, record.id, record.metadata)


def _require_paths(what: str, **paths: str) -> None:
    for name, path in paths.items():
        if not isinstance(path, str) or not path:
            raise ValueError(f"task.{name} is empty: give the {what} file")


def _missing_files(what: str, *paths: str) -> list[str]:
    """The local files of ``paths`` that are not here (hub ids are the launcher's to fetch)."""
    return [f"{what} file not found: {path}" for path in paths
            if parse_dataset_id(path) is None and not Path(path).is_file()]


def _here(path: str) -> bool:
    """Whether the file ``path`` names (a hub id: its fetched split) is on this machine."""
    dataset = parse_dataset_id(path)
    return (dataset_file(dataset) if dataset else Path(path)).is_file()


def _check_columns(check, **paths: str) -> None:
    """``check`` each file that is here; a missing column is a ``DatasetError`` naming the field."""
    for name, path in paths.items():
        if _here(path):
            try:
                check(path)
            except DatasetError as err:
                raise DatasetError(f"task.{name}: {err}") from None
