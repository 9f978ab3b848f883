"""The configuration layer: experiment files, overrides, tags, printing, diffs, JSON.

The only place besides :mod:`ppo.launch` that imports Fiddle.  ``ConfigError`` is importable without Fiddle
(``from ppo.config import ConfigError``); everything else is imported from its module:

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

from ppo.config.errors import ConfigError

__all__ = ["ConfigError"]
