"""Configs to and from JSON (Fiddle's own format), as stored in a run directory's ``config.json``.

Functions and classes in the graph are stored as import references (module + name), so loading needs their
modules importable: a class defined in an experiment file needs that file loaded first
(:func:`ppo.config.loading.load_module` registers it under the same module name).
"""

from __future__ import annotations

import re

import fiddle as fdl
from fiddle.experimental import serialization

from ppo.config.errors import ConfigError
from ppo.config.paths import is_node, walk


def _path_of(message: str) -> str:
    match = re.search(r"at path '<root>\.?([^']*)'", message)
    return match.group(1) if match else ""


def _first_unserializable(root: fdl.Buildable) -> str:
    for loc in walk(root):
        if is_node(loc.value):
            continue
        try:
            serialization.dump_json(loc.value)
        except Exception:  # noqa: BLE001
            deeper = [inner for inner in walk(root) if inner.path.startswith(loc.path + ".")]
            for inner in deeper:
                try:
                    serialization.dump_json(inner.value)
                except Exception:  # noqa: BLE001
                    return inner.path
            return loc.path
    return ""


def to_json(root: fdl.Buildable, indent: int | None = 2) -> str:
    try:
        return serialization.dump_json(root, indent=indent)
    except Exception as err:  # noqa: BLE001 - fiddle raises several types; all mean "cannot be stored"
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        path = _path_of(str(err)) or _first_unserializable(root)
        where = f"config path '{path}'" if path else "the config"
        raise ConfigError(f"{where} cannot be saved as JSON ({first}); use plain values (str instead of "
                          f"pathlib.Path, module-level functions instead of lambdas)") from None


def from_json(text: str) -> fdl.Buildable:
    try:
        return serialization.load_json(text)
    except Exception as err:  # noqa: BLE001
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"cannot load the config JSON: {type(err).__name__}: {first}") from None
