"""The layers of the orchestration code, read from the source (every ``import``, at the top of a module or inside a
function, since a lazy import closes a cycle all the same):

- ``launch.py`` is the only CLI entry: it dispatches to :mod:`ppo.launch.cli` or :mod:`ppo.sweep.cli`, and no module of
  ``ppo`` imports either CLI;
- sweeps build on the launch layer, never the other way round: no ``ppo.launch`` module imports ``ppo.sweep``;
- the modules of ``ppo/launch`` and ``ppo/sweep`` import each other without a cycle;
- the training side is layered (:data:`BELOW`): pure math, data, the cluster plan, collection, the actors, the loop,
  each importing nothing above it, and the loop nothing from the launcher.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.launch.conftest import REPO

LAYERS = ("ppo.launch", "ppo.sweep")
CLIS = {"ppo.launch.cli", "ppo.sweep.cli"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path, known: set[str]) -> set[str]:
    """The modules ``path`` imports anywhere in its body; ``from pkg import name`` counts as ``pkg.name`` when that
    is a module of ``known``, else as ``pkg``."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """``{module: modules of packages it imports}`` for every module under ``root`` in ``packages``."""
    files = [p for pkg in packages for p in sorted((root / pkg.replace(".", "/")).rglob("*.py"))]
    known = {module_name(p, root) for p in files}
    return {module_name(p, root): {m for m in imports(p, root, known) if m in known and m != module_name(p, root)}
            for p in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_launch_and_sweep_modules_import_each_other_without_a_cycle():
    graph = import_graph(REPO, LAYERS)
    assert "ppo.sweep.runner" in graph and "ppo.launch.rundir" in graph["ppo.sweep.runner"]  # the walk saw imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_launch_layer_imports_nothing_from_sweeps():
    graph = import_graph(REPO, LAYERS)
    wrong = {m: sorted(t for t in targets if t.startswith("ppo.sweep"))
             for m, targets in graph.items() if m.startswith("ppo.launch")}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_only_launch_py_imports_the_command_lines():
    known = {module_name(p, REPO) for p in (REPO / "ppo").rglob("*.py")}
    users = {module_name(p, REPO): sorted(imports(p, REPO, known) & CLIS) for p in (REPO / "ppo").rglob("*.py")}
    assert {m: clis for m, clis in users.items() if clis} == {}
    assert imports(REPO / "launch.py", REPO, known) >= CLIS


LOOP_LAYERS = ("ppo.algorithms", "ppo.data", "ppo.cluster", "ppo.rollout", "ppo.workers", "ppo.loop")
"""The training side, lowest first: pure math, then data, the cluster plan, collection, the actors, the loop."""

BELOW = {
    "ppo.algorithms": ("ppo.data", "ppo.cluster", "ppo.rollout", "ppo.workers", "ppo.loop", "ppo.launch"),
    "ppo.data": ("ppo.cluster", "ppo.rollout", "ppo.workers", "ppo.loop", "ppo.launch"),
    "ppo.cluster": ("ppo.rollout", "ppo.workers", "ppo.loop", "ppo.launch"),
    "ppo.rollout": ("ppo.loop", "ppo.launch"),
    "ppo.workers": ("ppo.loop", "ppo.launch"),
    "ppo.loop": ("ppo.launch", "ppo.sweep", "ppo.nightly"),
}
"""What each package of the training side must not import: the plan knows nothing of the actors it places, the
actors nothing of the loop, and the loop nothing of the launcher (which hands it the config as data,
``wandb_config.json``)."""


def test_each_training_package_imports_nothing_above_it():
    known = {module_name(p, REPO) for p in (REPO / "ppo").rglob("*.py")}
    files = {module_name(p, REPO): p for p in (REPO / "ppo").rglob("*.py")}
    wrong = {}
    for module, path in files.items():
        package = next((pkg for pkg in BELOW if module == pkg or module.startswith(pkg + ".")), None)
        if package is not None:
            above = sorted(m for m in imports(path, REPO, known) if m.startswith(BELOW[package]))
            if above:
                wrong[module] = above
    assert wrong == {}


def test_the_training_packages_import_each_other_without_a_cycle():
    graph = import_graph(REPO, LOOP_LAYERS)
    assert "ppo.loop.schedules" in graph["ppo.loop.trainer"]  # the walk saw imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_walk_finds_a_lazy_import_cycle(tmp_path):
    """The checks above are only as good as the walk: a cycle closed by an import inside a function is found."""
    pkg = tmp_path / "ppo" / "launch"
    pkg.mkdir(parents=True)
    (tmp_path / "ppo" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from ppo.launch import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("def g():\n    import ppo.launch.a\n")
    graph = import_graph(tmp_path, ("ppo.launch",))
    assert find_cycle(graph) == ["ppo.launch.a", "ppo.launch.b", "ppo.launch.c", "ppo.launch.a"]
    (pkg / "c.py").write_text("def g():\n    pass\n")
    assert find_cycle(import_graph(tmp_path, ("ppo.launch",))) is None
