"""The flattened config (one ``path = value`` line per leaf), diffs between configs, and change markers.

Lines read like ``fiddle.printing.as_str_flattened`` but use the override spelling of paths, show each
sub-config's class (``advantage = Config[GAE]``) so that swapping a component shows up, and end with comments::

    advantage = Config[GAE]
    advantage.lam = 0.95  # default
    policy.optimizer.lr = 5e-07  # <- override policy.optimizer.lr=5e-7 (was 2e-05)
    seed = 3  # tag Seed  # <- override tag:Seed=3 (was 0)

Unset arguments are shown with the class default, which is also what diffs compare (an argument set to its
default is no change).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import fiddle as fdl

from ppo.config.paths import ABSENT, Location, is_node, node_label, walk


@dataclasses.dataclass(frozen=True)
class NodeRef:
    """Stands for a sub-config in flattened values and diffs: ``Config[GAE]``."""

    label: str

    def __repr__(self) -> str:
        return self.label


class Change(NamedTuple):
    """One differing path: ``(path, old, new)``; ``ABSENT`` on the side where the path does not exist."""

    path: str
    old: Any
    new: Any


def flatten(root: fdl.Buildable) -> list[Location]:
    """The printed locations of ``root``, in signature order."""
    return [loc for loc in walk(root) if loc.printed]


def flat_values(root: fdl.Buildable) -> dict[str, Any]:
    """``{path: value}`` for every printed location; sub-configs appear as :class:`NodeRef`."""
    return {loc.path: NodeRef(node_label(loc.value)) if is_node(loc.value) else loc.value for loc in flatten(root)}


def _snapshot(root: fdl.Buildable) -> dict[str, Any]:
    """:func:`flat_values` with leaves copied, so that later in-place edits (``checks.0=...``) show as changes."""
    values = {}
    for path, value in flat_values(root).items():
        try:
            values[path] = copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - an uncopyable leaf is compared as it is
            values[path] = value
    return values


def format_value(value: Any) -> str:
    if is_node(value):
        return node_label(value)
    return repr(value)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    try:
        if a == b:
            return True
    except Exception:  # noqa: BLE001 - arrays and other odd values compare by repr
        pass
    return repr(a) == repr(b)


def diff_values(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    paths = list(old) + [p for p in new if p not in old]
    return [Change(p, old.get(p, ABSENT), new.get(p, ABSENT)) for p in paths
            if not _same(old.get(p, ABSENT), new.get(p, ABSENT))]


def diff(old: fdl.Buildable, new: fdl.Buildable) -> list[Change]:
    """What differs between two configs, as ``(path, old, new)`` triples in the order of the flattened print."""
    return diff_values(flat_values(old), flat_values(new))


def flattened_text(root: fdl.Buildable, marks: Mapping[str, str] | None = None) -> str:
    """One ``path = value`` line per leaf; ``marks`` adds a ``# <- ...`` comment to the lines they name.

    Marks for paths that no longer exist (a sub-config replaced by another class) are listed at the end as
    ``# removed: path``.
    """
    marks = dict(marks or {})
    lines = []
    for loc in flatten(root):
        comments = []
        if loc.is_default:
            comments.append("default")
        if loc.tags:
            comments.append("tag " + ", ".join(sorted(t.__name__ for t in loc.tags)))
        if loc.path in marks:
            comments.append(f"<- {marks.pop(loc.path)}")
        suffix = "".join(f"  # {c}" for c in comments)
        lines.append(f"{loc.path} = {format_value(loc.value)}{suffix}")
    lines += [f"# removed: {path}  # <- {mark}" for path, mark in marks.items()]
    return "\n".join(lines)


class EditLog:
    """Applies edits (fiddlers, overrides) to a config and remembers which edit changed which path.

    ``log.apply("override lr=1", lambda: apply_override(cfg, "lr=1"))``; then :meth:`changes` gives the net
    difference from the config as first seen, each with the source of its last edit, and :meth:`marks` the
    comments for :func:`flattened_text`.
    """

    def __init__(self, root: fdl.Buildable):
        self.root = root
        self._base = _snapshot(root)
        self._sources: dict[str, str] = {}

    def apply(self, source: str, edit: Callable[[], Any]) -> None:
        before = _snapshot(self.root)
        edit()
        for change in diff_values(before, flat_values(self.root)):
            self._sources[change.path] = source

    def changes(self) -> list[tuple[Change, str]]:
        return [(c, self._sources.get(c.path, "edit")) for c in diff_values(self._base, flat_values(self.root))]

    def marks(self) -> dict[str, str]:
        return {c.path: f"{source} (new)" if c.old is ABSENT else f"{source} (was {c.old!r})"
                for c, source in self.changes()}
