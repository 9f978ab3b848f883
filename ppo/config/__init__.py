"""The configuration layer: experiment files, overrides, tags, printing, diffs, JSON.

The only place besides :mod:`ppo.launch` that imports Fiddle.  ``ConfigError`` is importable without Fiddle
(``from ppo.config.errors import ConfigError``); everything else is loaded on first use.

- :mod:`~ppo.config.loading`: ``load_experiment(path)`` -> ``ExperimentFile`` (``.config()``, ``.nightly``,
  ``.fiddler(name)``, ``.apply_fiddler(cfg, name)``); ``load_module``.
- :mod:`~ppo.config.overrides`: ``parse_override("a.b=1")``, ``apply_override(cfg, "a.b=1")``,
  ``set_tag(cfg, "Seed", 3)``; values are Python literals, bare words strings.
- :mod:`~ppo.config.paths`: dotted paths (``walk``, ``locate``, ``all_paths``, ``required_unset``).
- :mod:`~ppo.config.tags`: ``Seed``, ``DType``, ``MaxSequenceLength``.
- :mod:`~ppo.config.printing`: ``flattened_text(cfg, marks)``, ``diff(a, b)`` -> ``[(path, old, new)]``,
  ``EditLog``.
- :mod:`~ppo.config.serialization`: ``to_json`` / ``from_json``.
- :mod:`~ppo.config.graph`: ``render_graph(cfg, "out.svg")``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ppo.config.errors import ConfigError

_EXPORTS = {
    "load_experiment": "loading", "load_module": "loading", "ExperimentFile": "loading",
    "Override": "overrides", "parse_override": "overrides", "parse_value": "overrides",
    "apply_override": "overrides", "apply_overrides": "overrides", "set_tag": "overrides",
    "walk": "paths", "locate": "paths", "all_paths": "paths", "required_unset": "paths",
    "Seed": "tags", "DType": "tags", "MaxSequenceLength": "tags",
    "Change": "printing", "EditLog": "printing", "diff": "printing", "flat_values": "printing",
    "flattened_text": "printing",
    "to_json": "serialization", "from_json": "serialization",
    "render_graph": "graph",
}

__all__ = ["ConfigError", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ppo.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ppo.config.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
