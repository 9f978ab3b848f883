"""Dotted paths into a Fiddle graph: the addresses that overrides, the flattened print and diffs share.

A path joins the argument names of ``fdl.Config``/``fdl.Partial`` nodes and the indices or keys of lists, tuples
and dicts with dots: ``policy.optimizer.lr``, ``checks.0``, ``executor.additional_parameters.exclusive``.  The
flattened print (``--dry-run``, ``config.txt``) uses the same spelling, so any of its lines can be pasted back as an
override.  Dict keys that contain a dot cannot be addressed.

:func:`walk` lists every addressable location (unset arguments with their defaults included); :func:`locate`
resolves one path for writing, with a did-you-mean for anything that does not exist.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import fiddle as fdl
from fiddle.tagging import TaggedValueCls

from ppo.config.errors import ConfigError


class _Sentinel:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


REQUIRED = _Sentinel("<required>")
"""The value of an unset argument that has no default."""
FACTORY = _Sentinel("<default_factory>")
"""The value of an unset dataclass field whose default comes from a ``default_factory``."""
ABSENT = _Sentinel("<absent>")
"""Old or new value of a path that exists on one side of a diff only."""


@dataclasses.dataclass(frozen=True)
class Location:
    path: str
    value: Any
    is_default: bool = False
    tags: frozenset = frozenset()
    printed: bool = True


def is_node(value: Any) -> bool:
    """A Fiddle node with arguments of its own (tagged values are leaves: their tag, not their ``value``, matters)."""
    return isinstance(value, fdl.Buildable) and not isinstance(value, TaggedValueCls)


def node_label(node: fdl.Buildable) -> str:
    fn = fdl.get_callable(node)
    return f"{type(node).__name__}[{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}]"


def _contains_node(value: Any) -> bool:
    if is_node(value):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_node(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_node(v) for v in value.values())
    return False


def _params(node: fdl.Buildable) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in node.__signature_info__.parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _accepts_any_keyword(node: fdl.Buildable) -> bool:
    return any(p.kind == p.VAR_KEYWORD for p in node.__signature_info__.parameters.values())


def _default(param: inspect.Parameter) -> Any:
    if param.default is inspect.Parameter.empty:
        return REQUIRED
    if param.default is dataclasses.MISSING or type(param.default).__name__ == "_HAS_DEFAULT_FACTORY_CLASS":
        return FACTORY
    return param.default


def _arguments(node: fdl.Buildable) -> Iterator[tuple[str, Any, bool]]:
    """``(name, value, is_default)`` for the node's arguments, in signature order, then extra keyword arguments."""
    params = _params(node)
    for name, param in params.items():
        if name in node.__arguments__:
            yield name, node.__arguments__[name], False
        else:
            yield name, _default(param), True
    for name, value in node.__arguments__.items():
        if name not in params and isinstance(name, str):
            yield name, value, False


def _tagged_value(value: Any) -> Any:
    if isinstance(value, TaggedValueCls):
        inner = value.__arguments__.get("value", fdl.NO_VALUE)
        return REQUIRED if inner is fdl.NO_VALUE else inner
    return value


def _tags_of(parent: Any, key: Any, value: Any) -> frozenset:
    tags = set()
    if isinstance(parent, fdl.Buildable):
        tags |= set(parent.__argument_tags__.get(key, ()))
    if isinstance(value, TaggedValueCls):
        tags |= set(value.tags)
    return frozenset(tags)


def join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def walk(root: Any) -> Iterator[Location]:
    """Every addressable location below ``root`` (``root`` itself excluded), depth first in signature order.

    ``printed`` is False for a list/tuple/dict that holds Fiddle nodes (its elements are printed instead) and for
    the elements of a plain container (printed as one value, but still addressable: ``checks.0``).
    """
    def children(value: Any) -> Iterator[tuple[Any, Any, bool]]:
        if is_node(value):
            yield from _arguments(value)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                yield i, v, False
        elif isinstance(value, dict):
            for k, v in value.items():
                yield k, v, False

    def visit(value: Any, path: str, printed_children: bool, on_path: frozenset) -> Iterator[Location]:
        if id(value) in on_path:
            return
        on_path = on_path | {id(value)}
        expands = printed_children and (is_node(value) or _contains_node(value))
        for key, child, is_default in children(value):
            child_path = join(path, key)
            child_expands = expands and (is_node(child) or _contains_node(child))
            printed = expands and (is_node(child) or not child_expands)
            yield Location(child_path, _tagged_value(child), is_default, _tags_of(value, key, child), printed)
            if not is_default and not isinstance(child, TaggedValueCls):
                yield from visit(child, child_path, printed_children=child_expands, on_path=on_path)

    yield from visit(root, "", True, frozenset())


def all_paths(root: Any) -> list[str]:
    return [loc.path for loc in walk(root)]


def did_you_mean(wrong: str, candidates: list[str]) -> str:
    match = difflib.get_close_matches(wrong, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


@dataclasses.dataclass
class Slot:
    """A resolved path: what is there now (``REQUIRED``/``FACTORY``/a default when unset) and how to replace it."""

    path: str
    current: Any
    is_default: bool
    tags: frozenset
    set: Callable[[Any], None]


def locate(root: fdl.Buildable, path: str, *, allow_new_key: bool = True) -> Slot:
    """Resolve ``path`` for writing; raise :class:`ConfigError` with a did-you-mean when it does not exist."""
    parts = path.split(".")
    if not path or any(not p for p in parts):
        raise ConfigError(f"malformed config path '{path}': expected dotted names such as policy.optimizer.lr")
    value: Any = root
    setter: Callable[[Any], None] = _cannot_replace_root
    is_default = False
    tags: frozenset = frozenset()
    prefix = ""
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = join(prefix, part)
        if is_default or value is REQUIRED or value is FACTORY:
            _refuse_default(root, path, prefix, value)
        if is_node(value):
            node = value
            if part not in _params(node) and part not in node.__arguments__:
                if not last:
                    raise _unknown_path(root, path)
                if not _accepts_any_keyword(node):
                    raise _unknown_argument(node, prefix, part)
            args = dict((n, (v, d)) for n, v, d in _arguments(node))
            child, is_default = args.get(part, (ABSENT, False))
            tags = _tags_of(node, part, child)
            setter = _attr_setter(node, part)
        elif isinstance(value, (list, tuple)):
            index = _index(part, value, prefix, root, path)
            child, is_default, tags = value[index], False, _tags_of(None, None, value[index])
            setter = _item_setter(value, index, setter)
        elif isinstance(value, dict):
            key = _dict_key(part, value)
            if key not in value and not (last and allow_new_key):
                raise _unknown_path(root, path)
            child, is_default, tags = value.get(key, ABSENT), False, _tags_of(None, None, value.get(key))
            setter = _item_setter(value, key, setter)
        else:
            raise _unknown_path(root, path)
        prefix, value = here, child
    return Slot(path, _tagged_value(value), is_default, tags, _tag_aware(value, setter))


def _cannot_replace_root(_: Any) -> None:
    raise ConfigError("the root of the config cannot be replaced by an override")


def _attr_setter(node: fdl.Buildable, name: str) -> Callable[[Any], None]:
    return lambda v: setattr(node, name, v)


def _item_setter(container: Any, key: Any, parent_setter: Callable[[Any], None]) -> Callable[[Any], None]:
    def set_item(v: Any) -> None:
        if isinstance(container, tuple):
            parent_setter(container[:key] + (v,) + container[key + 1:])
        else:
            container[key] = v
    return set_item


def _tag_aware(current: Any, setter: Callable[[Any], None]) -> Callable[[Any], None]:
    if isinstance(current, TaggedValueCls):
        return lambda v: setattr(current, "value", v)
    return setter


def _index(part: str, seq: Any, prefix: str, root: Any, path: str) -> int:
    try:
        index = int(part)
    except ValueError:
        raise _unknown_path(root, path) from None
    if not -len(seq) <= index < len(seq):
        raise ConfigError(f"index {index} out of range for config path '{prefix}' ({len(seq)} items)")
    return index % len(seq)


def _dict_key(part: str, mapping: dict) -> Any:
    if part in mapping:
        return part
    try:
        as_int = int(part)
    except ValueError:
        return part
    return as_int if as_int in mapping else part


def _unknown_path(root: Any, path: str) -> ConfigError:
    hint = did_you_mean(path, all_paths(root)) or " (--dry-run lists every path)"
    return ConfigError(f"unknown config path '{path}'{hint}")


def _unknown_argument(node: fdl.Buildable, prefix: str, name: str) -> ConfigError:
    where = join(prefix, name)
    valid = list(_params(node))
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f"; did you mean '{join(prefix, close[0])}'?" if close else f"; it takes: {', '.join(valid[:12])}"
    owner = getattr(fdl.get_callable(node), "__qualname__", node_label(node))
    return ConfigError(f"{owner} takes no argument '{name}' (config path '{where}'){hint}")


def _refuse_default(root: Any, path: str, prefix: str, value: Any) -> None:
    if value is FACTORY:
        raise ConfigError(f"config path '{prefix}' is the class's default_factory, so '{path}' cannot be set; "
                          f"build '{prefix}' with fdl.Config(...) in config() to configure its fields")
    if value is REQUIRED:
        raise ConfigError(f"config path '{prefix}' is unset, so '{path}' cannot be set; give '{prefix}' a value "
                          f"in config() first")
    if value is None or isinstance(value, (bool, int, float, str)):
        raise _unknown_path(root, path)
    raise ConfigError(f"config path '{prefix}' is the class default {value!r}, so '{path}' cannot be set alone; "
                      f"set '{prefix}' as a whole")


def required_unset(root: Any) -> list[str]:
    """Paths of arguments that must be set before the graph can build (no value and no default)."""
    return [loc.path for loc in walk(root) if loc.value is REQUIRED]
