"""Fiddle tags for values that must agree in many places of an experiment graph.

Tag a field once where a recipe builds it, and every tagged field follows one setting::

    cfg.seed = Seed.new(0)                          # a tagged value ...
    fdl.add_tag(cfg.generation, "seed", Seed)       # ... or a tagged field
    python launch.py exp.py tag:Seed=3              # sets every field tagged Seed
    python launch.py exp.py seed=3                  # the same: a path to a tagged field sets its tag everywhere

Only ``ppo/config`` and ``ppo/launch`` import Fiddle; library classes stay plain.
"""

from __future__ import annotations

import fiddle as fdl


class Seed(fdl.Tag):
    """The run's random seed: data order, sampling, initialisation."""


class DType(fdl.Tag):
    """The compute dtype of models and engines, e.g. 'bfloat16' or 'float32'."""


class MaxSequenceLength(fdl.Tag):
    """The longest prompt + response in tokens: engine context, packing budgets, position embeddings."""


TAGS: tuple[type[fdl.Tag], ...] = (Seed, DType, MaxSequenceLength)
