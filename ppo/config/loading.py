"""Loading experiment files: ``def config() -> fdl.Config``, optional ``NIGHTLY`` checks, named fiddlers.

The file is imported from its path.  Its directory's parent goes on ``sys.path`` so recipes can share code
(``from experiments import base``); a file in a package directory is imported under its package name
(``experiments.tiny_cpu``), a loose file under its stem (and its own directory goes on ``sys.path`` too).  The same
name is used again when a job loads its stored copy, so classes defined in the file resolve from ``config.json``.

Every failure is one line naming the file: missing file, import error (``file:line: Type: message``), no
``config()``, ``config()`` raising or returning something else, a malformed ``NIGHTLY``, an unknown fiddler.
A file that defines ``SWEEP`` is a sweep (:func:`is_sweep_file`; ``launch.py`` hands it to :mod:`ppo.sweep`);
:func:`load_experiment` refuses it.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import fiddle as fdl

from ppo.config.errors import ConfigError
from ppo.metrics import CheckError, parse_check


def _where(path: Path, err: BaseException) -> str:
    """``file:line`` of the deepest frame of ``err`` inside ``path`` (or the file alone)."""
    if isinstance(err, SyntaxError) and err.filename and Path(err.filename).resolve() == path.resolve():
        return f"{path}:{err.lineno}"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def describe(err: BaseException) -> str:
    """``Type: first line of the message``."""
    lines = str(err).strip().splitlines()
    if isinstance(err, SyntaxError):
        lines = [err.msg or ""]
    return f"{type(err).__name__}: {lines[0]}" if lines and lines[0] else type(err).__name__


def module_name_for(path: Path) -> tuple[str, list[str]]:
    """The module name a file is imported under and the directories that go on ``sys.path`` for it."""
    path = path.resolve()
    if (path.parent / "__init__.py").exists():
        return f"{path.parent.name}.{path.stem}", [str(path.parent.parent)]
    return path.stem, [str(path.parent.parent), str(path.parent)]


def is_sweep_file(path: str | Path) -> bool:
    """Whether the Python file at ``path`` assigns (or imports) ``SWEEP`` at its top level (read, not run): a sweep
    file, which ``launch.py`` hands to :mod:`ppo.sweep`."""
    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        return False
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.ImportFrom):
            names = [alias.asname or alias.name for alias in node.names]
        else:
            names = []
        if "SWEEP" in names:
            return True
    return False


def load_module(path: str | Path, module_name: str | None = None, sys_path: list[str] | None = None) -> ModuleType:
    """Import the file at ``path`` as ``module_name`` (default: :func:`module_name_for`), registered in sys.modules."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such experiment file: {path}")
    if path.suffix != ".py":
        raise ConfigError(f"{path} is not a Python file (an experiment is a .py file with def config())")
    default_name, default_sys_path = module_name_for(path)
    module_name = module_name or default_name
    for entry in reversed(sys_path if sys_path is not None else default_sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    package = module_name.rpartition(".")[0]
    if package:
        try:
            importlib.import_module(package)
        except ImportError:
            pass
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - any error in user code becomes one line
        if previous is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = previous
        raise ConfigError(f"{_where(path, err)}: importing the file raised {describe(err)}") from None
    return module


@dataclasses.dataclass
class ExperimentFile:
    path: Path
    module: ModuleType

    @property
    def module_name(self) -> str:
        return self.module.__name__

    @property
    def is_sweep(self) -> bool:
        return hasattr(self.module, "SWEEP")

    def config(self) -> fdl.Buildable:
        fn = getattr(self.module, "config", None)
        if not callable(fn):
            raise ConfigError(f"{self.path} defines no config() function (an experiment file returns its graph "
                              f"from def config() -> fdl.Config)")
        try:
            cfg = fn()
        except Exception as err:  # noqa: BLE001
            raise ConfigError(f"{_where(self.path, err)}: config() raised {describe(err)}") from None
        if not isinstance(cfg, fdl.Buildable):
            raise ConfigError(f"{self.path}: config() returned {type(cfg).__name__}, expected an fdl.Config")
        return cfg

    @property
    def nightly(self) -> dict | None:
        """``NIGHTLY = {"step": int, "checks": [str, ...]}``, checked for shape and check syntax."""
        nightly = getattr(self.module, "NIGHTLY", None)
        if nightly is None:
            return None
        where = f"{self.path}: NIGHTLY"
        if not isinstance(nightly, dict) or set(nightly) - {"step", "checks"} or "checks" not in nightly:
            raise ConfigError(f"{where} must be a dict {{'step': int, 'checks': [str, ...]}}")
        step = nightly.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise ConfigError(f"{where}['step'] must be a non-negative int, got {step!r}")
        checks = nightly["checks"]
        if not isinstance(checks, (list, tuple)) or not all(isinstance(c, str) for c in checks):
            raise ConfigError(f"{where}['checks'] must be a list of strings")
        for i, check in enumerate(checks):
            try:
                parse_check(check)
            except CheckError as err:
                raise ConfigError(f"{where}['checks'][{i}]: {err}") from None
        return nightly

    def fiddler_names(self) -> list[str]:
        """Module-level functions of one positional argument defined in the file (``config`` excluded)."""
        names = []
        for name, fn in vars(self.module).items():
            if name.startswith("_") or name == "config" or not inspect.isfunction(fn):
                continue
            if fn.__module__ != self.module.__name__:
                continue
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(params) == 1:
                names.append(name)
        return names

    def fiddler(self, name: str) -> Callable[[fdl.Buildable], Any]:
        names = self.fiddler_names()
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else f" (fiddlers: {', '.join(names) or 'none'})"
            raise ConfigError(f"{self.path} has no fiddler '{name}'{hint}")
        return getattr(self.module, name)

    def apply_fiddler(self, cfg: fdl.Buildable, name: str) -> None:
        fn = self.fiddler(name)
        try:
            fn(cfg)
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001
            raise ConfigError(f"{_where(self.path, err)}: fiddler {name}() raised {describe(err)}") from None


def load_experiment(path: str | Path) -> ExperimentFile:
    """Import an experiment file; sweep files are refused here (they are :mod:`ppo.sweep`'s)."""
    path = Path(path)
    module = load_module(path)
    loaded = ExperimentFile(path, module)
    if loaded.is_sweep:
        raise ConfigError(f"{path} is a sweep file (it defines SWEEP), not an experiment: run it with "
                          f"python launch.py {path}")
    return loaded
