"""The random streams of a run, each derived from the experiment's ``seed`` by what it is for and where it is used.

A run draws randomness in several places: vLLM's sampling for each generation attempt of each step, the order of the
minibatches in each epoch of each step, validation's sampled answers at each validated step. Each stream's seed is
``derive_seed(seed, purpose, *position)``: numpy's ``SeedSequence`` over (the experiment's seed, the purpose's
number, the position), so that two streams never share a seed by accident (as ``seed * K + step * M + attempt``
arithmetic can, when ``attempt`` reaches ``M``), a rerun and a resumed run draw exactly the same numbers, and a new
purpose never shifts the existing ones.

The data order (``PromptLoader``) and the workers' initial state take the experiment's seed as it is: each is a single
stream of its own generator.  The warm start's batches take ``trainer.warm_start_seed`` instead: the warm start makes
the checkpoint RL starts from, which runs that differ only in ``seed`` share.
"""

from __future__ import annotations

import numpy as np

PURPOSES = {"sampling": 1, "minibatch_order": 2, "validation_sampling": 3}
"""Each stream's number in the derivation.  Append new purposes; renumbering one changes every run's draws."""


def derive_seed(seed: int, purpose: str, *position: int) -> int:
    """A 32-bit seed for ``purpose`` at ``position`` (e.g. step and attempt) of the run seeded with ``seed``.

    >>> derive_seed(0, "sampling", 1, 0) == derive_seed(0, "sampling", 1, 0)
    True
    >>> derive_seed(0, "sampling", 1, 0) != derive_seed(0, "minibatch_order", 1, 0)
    True
    """
    if purpose not in PURPOSES:
        raise ValueError(f"unknown seed purpose {purpose!r}; known: {', '.join(PURPOSES)}")
    entropy = [seed, PURPOSES[purpose], *position]
    if any(not isinstance(value, int) or value < 0 for value in entropy):
        raise ValueError(f"seed and position must be non-negative integers, got {entropy}")
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0])
