"""Every file the code and the docs cite by path exists, and every dotted ``ppo.*`` name they cite resolves: a moved
module, a renamed function or doc leaves no dangling reference (``docs/architecture.md`` was cited for months before
it was written; ``ppo.algorithms.clipped_pg_loss`` and ``ppo.config.from_json`` never existed)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.])((?:docs|ppo|analysis|bench|tests)/[\w/.-]+\.(?:md|py))")
"""Cited docs and modules (``experiments/`` and ``sweeps/`` paths in the docs are often files a command writes)."""
SOURCES = ["README.md", "docs/*.md", "ppo/**/*.py", "experiments/*.py", "sweeps/*.py", "analysis/*.py", "bench/*.py",
           "tests/**/*.py"]


def cited_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in CITED.findall(text)}


def test_every_cited_path_exists():
    dangling = {}
    for pattern in SOURCES:
        for source in sorted(ROOT.glob(pattern)):
            missing = sorted(p for p in cited_paths(source.read_text()) if "*" not in p and not (ROOT / p).exists())
            if missing:
                dangling[str(source.relative_to(ROOT))] = missing
    assert dangling == {}


def test_a_dangling_reference_is_found():
    assert cited_paths("see ``docs/architecture.md`` and ppo/loop/trainer.py.") == {"docs/architecture.md",
                                                                                     "ppo/loop/trainer.py"}
    assert cited_paths("tests/workers/test_plan.py, not workers/plan.py") == {"tests/workers/test_plan.py"}


DOTTED = re.compile(r"(?<![\w/.-])ppo(?:\.[A-Za-z_]\w*)+")
"""A dotted name in ``ppo`` (``ppo.loop.trainer.PPOTrainer.train_step``); ``docs/ppo.md``, a path, is not one."""
DOTTED_SOURCES = ["README.md", "docs/*.md", "ppo/**/*.py", "experiments/*.py", "sweeps/*.py", "analysis/*.py",
                  "bench/*.py", "launch.py"]


def module_source(name: str, root: Path = ROOT) -> Path | None:
    """The file (or, for a namespace package, the folder) of module ``name``, or None."""
    base = root / name.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return base if base.is_dir() else None


def top_level_names(module: str, root: Path = ROOT) -> dict[str, ast.AST | tuple[str, str]]:
    """What ``module`` defines at its top level (under ``if``/``try`` too): classes, functions and assigned names as
    their nodes, imported names as ``(module, name)``."""
    path = module_source(module, root)
    if path is None or path.is_dir():
        return {}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: dict[str, ast.AST | tuple[str, str]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update((n.id, node) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names.update((alias.asname or alias.name, (base, alias.name)) for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update((alias.asname or alias.name.split(".")[0], (alias.name, "")) for alias in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body])

    visit(ast.parse(path.read_text()).body)
    return names


def resolves(dotted: str, root: Path = ROOT) -> bool:
    """Whether ``dotted`` names a module of ``root``, or something defined in one: a top-level name (followed to
    where it is imported from), a class's member (its body, ``self.<name>`` in its methods, or a base class's).
    Read from the source, so that checking imports no torch."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        if module_source(".".join(parts[:split]), root):
            return _in_module(".".join(parts[:split]), parts[split:], root)
    return False


def _in_module(module: str, rest: list[str], root: Path) -> bool:
    if not rest:
        return True
    if module_source(f"{module}.{rest[0]}", root):
        return _in_module(f"{module}.{rest[0]}", rest[1:], root)
    found = top_level_names(module, root).get(rest[0])
    if isinstance(found, tuple):
        source, name = found
        return _in_module(source, [name, *rest[1:]], root) if module_source(source, root) else len(rest) == 1
    return found is not None and _in_class(module, found, rest[1:], root)


def _in_class(module: str, node: ast.AST, rest: list[str], root: Path) -> bool:
    if not rest:
        return True
    if not isinstance(node, ast.ClassDef):
        return False
    members = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name) or (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                           and t.value.id == "self"):
                members.setdefault(t.id if isinstance(t, ast.Name) else t.attr, n)
    if rest[0] in members:
        return _in_class(module, members[rest[0]], rest[1:], root)
    bases = [top_level_names(module, root).get(b.id) for b in node.bases if isinstance(b, ast.Name)]
    return any(_in_class(module, base, rest, root) if isinstance(base, ast.ClassDef)
               else isinstance(base, tuple) and module_source(base[0], root) is not None
               and _in_module(base[0], [base[1], *rest], root) for base in bases)


def test_every_dotted_reference_resolves():
    dangling = {}
    for pattern in DOTTED_SOURCES:
        for source in sorted(ROOT.glob(pattern)):
            missing = sorted({name for name in DOTTED.findall(source.read_text()) if not resolves(name)})
            if missing:
                dangling[str(source.relative_to(ROOT))] = missing
    assert dangling == {}


def test_a_dangling_dotted_reference_is_found():
    assert DOTTED.findall("``ppo.algorithms.clipped_pg_loss`` (see docs/ppo.md)") == ["ppo.algorithms.clipped_pg_loss"]
    for name in ("ppo.algorithms.policy_loss.clipped_pg_loss", "ppo.rollout.generation", "ppo.metrics.CheckReport",
                 "ppo.loop.trainer.PPOTrainer.train_step", "ppo.workers.policy.PolicyWorker.offload"):
        assert resolves(name), name
    for name in ("ppo.algorithms.clipped_pg_loss", "ppo.config.from_json", "ppo.rollout.nothing",
                 "ppo.loop.trainer.PPOTrainer.no_such_method", "ppo.algorithms.policy_loss.clipped_pg_loss.x"):
        assert not resolves(name), name
