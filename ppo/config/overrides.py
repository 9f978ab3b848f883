"""Command-line overrides: ``path=value`` edits of an experiment graph.

- ``policy.optimizer.lr=5e-7``: a dotted path (see :mod:`ppo.config.paths`); list and tuple elements by index
  (``checks.0=...``), dict entries by key (a new key may be added to a dict).
- Values are Python literals read with ``ast.literal_eval`` (never ``eval``): numbers, strings, ``None``,
  ``True``/``False``, lists, tuples, dicts.  A bare word that is not a literal stays a string
  (``generation.dtype=bfloat16``, ``task.path=/data/gsm8k.jsonl``).  Where a string is set now, any text that is
  not a literal is taken as it is (``checks.0=data["x"]["40"] > 0.75``); elsewhere text with spaces, brackets,
  quotes or commas must be a valid literal.  ``none``/``true``/``false``/``null`` are refused as ambiguous.
- The value must fit what is there: a string for a number or a flag is refused, an integral float for an int
  becomes an int, an int for a float becomes a float, a list for a tuple becomes a tuple, a number for a string
  keeps the text as typed.  ``None`` is always accepted (validation decides).  A sub-config can only be replaced
  by ``None``; swapping components is what fiddlers (``--fiddler NAME``) are for.
- Tags: ``tag:Seed=3`` sets every field tagged :class:`~ppo.config.tags.Seed`.  A path to a tagged field does
  the same (``seed=3``), because a tag means "these values must agree".
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections.abc import Iterable
from typing import Any

import fiddle as fdl
from fiddle import tagging

from ppo.config.errors import ConfigError
from ppo.config.paths import ABSENT, FACTORY, REQUIRED, is_node, locate, node_label, walk

TAG_PREFIX = "tag:"
_LITERAL_CHARS = set("[](){}'\",")
_AMBIGUOUS = {"none": "None", "null": "None", "true": "True", "false": "False"}


@dataclasses.dataclass(frozen=True)
class Override:
    path: str
    value: Any
    text: str

    @property
    def is_tag(self) -> bool:
        return self.path.startswith(TAG_PREFIX)


def parse_value(raw: str, path: str = "", current: Any = ABSENT) -> Any:
    """The Python literal in ``raw``, or ``raw`` itself when it is a bare word or ``current`` is a string."""
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    where = f" for '{path}'" if path else ""
    if raw.lower() in _AMBIGUOUS:
        raise ConfigError(f"ambiguous value {raw!r}{where}: write {_AMBIGUOUS[raw.lower()]}, or quote it as a "
                          f"string: {path or 'path'}=\"'{raw}'\"")
    if isinstance(current, str):
        return raw
    if any(c in _LITERAL_CHARS or c.isspace() for c in raw):
        raise ConfigError(f"cannot parse value {raw!r}{where}: not a Python literal (quote strings: "
                          f"{path or 'path'}=\"'text'\")")
    return raw


def parse_override(text: str) -> Override:
    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise ConfigError(f"expected path=value, got '{text}' (e.g. policy.optimizer.lr=5e-7)")
    return Override(path, parse_value(raw, path), text)


def apply_override(root: fdl.Buildable, override: Override | str) -> None:
    """Apply ``path=value`` (text, checked path first and value second, or a parsed :class:`Override`)."""
    if isinstance(override, str):
        path, sep, raw = override.partition("=")
        if not sep or not path.strip():
            parse_override(override)
        path = path.strip()
        if path.startswith(TAG_PREFIX):
            tag = find_tag(root, path[len(TAG_PREFIX):])
            current = next((loc.value for loc in walk(root) if tag in loc.tags), ABSENT)
        else:
            current = locate(root, path).current
        override = Override(path, parse_value(raw, path, current), override)
    if override.is_tag:
        set_tag(root, override.path[len(TAG_PREFIX):], override.value)
        return
    slot = locate(root, override.path)
    if slot.tags:
        for tag in sorted(slot.tags, key=lambda t: t.__name__):
            set_tag(root, tag, override.value)
        return
    slot.set(coerce(override.path, slot.current, override.value, override.text.partition("=")[2]))


def apply_overrides(root: fdl.Buildable, overrides: Iterable[Override | str]) -> None:
    for override in overrides:
        apply_override(root, override)


def coerce(path: str, current: Any, new: Any, raw: str | None = None) -> Any:
    """``new`` made to fit the value at ``path`` now, or :class:`ConfigError` when it cannot."""
    if new is None or any(current is marker for marker in (None, REQUIRED, FACTORY, ABSENT)):
        return new
    if is_node(current):
        if is_node(new):
            return new
        raise ConfigError(f"config path '{path}' holds {node_label(current)}; an override can set it to None but "
                          f"not to {new!r}: swap components with a fiddler (--fiddler NAME)")
    if isinstance(current, bool):
        if isinstance(new, bool):
            return new
        raise ConfigError(f"config path '{path}' takes True or False (now {current}), got {new!r}")
    if isinstance(current, int):
        if isinstance(new, int) and not isinstance(new, bool):
            return new
        if isinstance(new, float) and new.is_integer():
            return int(new)
        raise ConfigError(f"config path '{path}' takes an int (now {current}), got {new!r}")
    if isinstance(current, float):
        if isinstance(new, (int, float)) and not isinstance(new, bool):
            return float(new)
        if isinstance(new, str) and new.lower() in ("inf", "-inf", "+inf", "nan"):
            return float(new)
        raise ConfigError(f"config path '{path}' takes a number (now {current}), got {new!r}")
    if isinstance(current, str):
        if isinstance(new, (int, float)) and raw is not None:
            return raw.strip()
        return new
    if isinstance(current, tuple) and isinstance(new, list):
        return tuple(new)
    if isinstance(current, list) and isinstance(new, tuple):
        return list(new)
    return new


def find_tag(root: fdl.Buildable, name: str) -> type[fdl.Tag]:
    """The tag in ``root`` called ``name`` (class name or dotted module path, case-insensitive)."""
    tags = sorted(tagging.list_tags(root, add_superclasses=True), key=lambda t: t.__name__)
    wanted = name.lower()
    for tag in tags:
        if wanted in (tag.__name__.lower(), f"{tag.__module__}.{tag.__qualname__}".lower()):
            return tag
    names = [t.__name__ for t in tags]
    close = difflib.get_close_matches(wanted, [n.lower() for n in names], n=1, cutoff=0.6)
    if close:
        match = next(n for n in names if n.lower() == close[0])
        raise ConfigError(f"unknown tag '{name}'; did you mean 'tag:{match}'?")
    listed = ", ".join(names) if names else "none"
    raise ConfigError(f"unknown tag '{name}' (tags in this config: {listed})")


def set_tag(root: fdl.Buildable, tag: type[fdl.Tag] | str, value: Any) -> None:
    """Set every field tagged ``tag`` (or a subclass of it) to ``value``, checking it fits each of them."""
    if isinstance(tag, str):
        tag = find_tag(root, tag)
    tagged = [loc for loc in walk(root) if any(issubclass(t, tag) for t in loc.tags)]
    for loc in tagged:
        value = coerce(loc.path, loc.value, value)
    fdl.set_tagged(root, tag=tag, value=value)
