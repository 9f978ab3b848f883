"""Fiddle without libcst and absl.logging until something uses them: ~0.3 s off every process that imports Fiddle
(half of a dry run's own time).

``import fiddle`` runs ``fiddle/__init__``, and no import of a Fiddle module avoids it.  It imports two packages it
uses only on rare paths:

- libcst (a few hundred frozen dataclasses, built at import; ~0.3 s here): ``fiddle._src.tagging``'s ``Tag`` uses
  ``fiddle._src.experimental.auto_config``, which defines ``_LambdaFinder(cst.CSTVisitor)`` to find a lambda's source
  when ``auto_config`` meets a lambda, its only use of libcst;
- absl.logging (with absl.flags; ~0.04 s): ``fiddle._src.reraised_exception`` logs with it when making an
  exception's proxy fails.

:func:`install` (called by ``ppo/__init__``, so before any Fiddle import of a process that imports ``ppo``) puts a
finder on ``sys.meta_path`` that, when ``fiddle`` itself is imported, executes ``fiddle/__init__`` with stand-ins for
those two in ``sys.modules``: for libcst, the two names ``auto_config`` reads at import (``CSTVisitor``, a plain class,
and ``metadata.PositionProvider``); for absl.logging, an empty module.  Then it takes the stand-ins out of
``sys.modules`` (any other import of either gets the real package) and binds, in each Fiddle module holding one, an
:class:`_OnFirstUse` instead: the first attribute read from it imports the real package, binds it in those modules and
answers.  For libcst it also makes ``_LambdaFinder`` what Fiddle's own import makes: its base the real ``CSTVisitor``
(the same MRO, metaclass ABCMeta) and its ``METADATA_DEPENDENCIES`` the real ``PositionProvider`` (``auto_config``
reads ``cst.parse_module`` before it makes a ``_LambdaFinder``).  ``tests/config/test_fiddle_import.py`` checks that
state against a process that imported libcst first, and ``auto_config`` on a lambda.

Nothing changes where a package is already imported, where Fiddle is imported before any ``ppo`` module, or where
``fiddle/__init__`` asks a stand-in for anything else (a Fiddle other than the pinned 0.3.1): then it is executed
again with the real packages.
"""

from __future__ import annotations

import abc
import importlib
import importlib.machinery
import sys
import threading
import types

_LOCK = threading.RLock()


class _StandInVisitor(metaclass=abc.ABCMeta):  # noqa: B024 - no abstract methods, as libcst.CSTVisitor
    """What ``_LambdaFinder`` subclasses until libcst is imported (ABCMeta, as ``libcst.CSTVisitor``'s; no slots,
    so ``__bases__`` can be swapped for the real one)."""


class _StandInPositionProvider:
    """The stand-in's ``metadata.PositionProvider``."""


def _libcst_stand_in() -> types.ModuleType:
    module = types.ModuleType("libcst", "stand-in while fiddle is imported (ppo.config.fiddle_import)")
    module.CSTVisitor = _StandInVisitor
    module.metadata = types.SimpleNamespace(PositionProvider=_StandInPositionProvider)
    return module


def _finish_libcst(libcst: types.ModuleType) -> None:
    """``auto_config._LambdaFinder`` as Fiddle's own import makes it, once libcst is imported."""
    finder = sys.modules["fiddle._src.experimental.auto_config"]._LambdaFinder
    if finder.__bases__ == (_StandInVisitor,):
        finder.__bases__ = (libcst.CSTVisitor,)
        finder.METADATA_DEPENDENCIES = (libcst.metadata.PositionProvider,)


STAND_INS = {
    "libcst": (_libcst_stand_in, _finish_libcst),
    "absl.logging": (lambda: types.ModuleType("absl.logging", "stand-in (ppo.config.fiddle_import)"), None),
}
"""The packages deferred: a stand-in for ``fiddle/__init__``'s import, and what to finish once the real one is in."""


class _OnFirstUse(types.ModuleType):
    """A deferred package where Fiddle's modules name it: the first attribute read imports it."""

    def __init__(self, name: str, holders: list[tuple[types.ModuleType, str]], finish) -> None:
        super().__init__(name, f"{name}, imported on first use (ppo.config.fiddle_import)")
        self._ppo_holders = holders
        self._ppo_finish = finish

    def __getattr__(self, attr: str):
        return getattr(self._ppo_load(), attr)

    def __repr__(self) -> str:
        return f"<{self.__name__}, imported on first use (ppo.config.fiddle_import)>"

    def _ppo_load(self) -> types.ModuleType:
        real = importlib.import_module(self.__name__)
        with _LOCK:
            if self._ppo_finish is not None:
                self._ppo_finish(real)
            for module, key in self._ppo_holders:
                if module.__dict__.get(key) is self:
                    setattr(module, key, real)
        return real


class _Loader:
    """Executes ``fiddle/__init__`` (with ``loader``, the real one) beside the stand-ins."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # as a plain import leaves them
        before = set(sys.modules)
        stand_ins = {name: make() for name, (make, _) in STAND_INS.items() if name not in sys.modules}
        sys.modules.update(stand_ins)
        try:
            self.loader.exec_module(module)
        except AttributeError:  # a Fiddle that reads more of a stand-in at import: import them for real
            _remove(stand_ins)
            for name in set(sys.modules) - before:
                if name.startswith("fiddle."):
                    del sys.modules[name]
            self.loader.exec_module(module)
            return
        finally:
            _remove(stand_ins)
        for name, stand_in in stand_ins.items():
            holders = [(m, key) for m in list(sys.modules.values()) if getattr(m, "__name__", "").startswith("fiddle")
                       for key, value in vars(m).items() if value is stand_in]
            deferred = _OnFirstUse(name, holders, STAND_INS[name][1])
            for holder, key in holders:
                setattr(holder, key, deferred)


def _remove(stand_ins: dict[str, types.ModuleType]) -> None:
    """Take the stand-ins out of ``sys.modules`` and of their parent packages."""
    for name, stand_in in stand_ins.items():
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent and getattr(sys.modules.get(parent), child, None) is stand_in:
            delattr(sys.modules[parent], child)


class _Finder:
    """On ``sys.meta_path``: finds ``fiddle`` (the top-level package only) as Python's path finder does, with
    :class:`_Loader` around its loader."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "fiddle":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once) unless Fiddle is already imported."""
    if "fiddle" in sys.modules or _Finder in sys.meta_path:
        return
    sys.meta_path.insert(0, _Finder)
