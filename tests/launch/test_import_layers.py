"""The layers of the orchestration code, read from the source (every ``import``, at the top of a module or inside a
function, since a lazy import closes a cycle all the same):

- ``launch.py`` is the only CLI entry: it dispatches to :mod:`ppo.launch.cli` or :mod:`ppo.sweep.cli`, and no module of
  ``ppo`` imports either CLI;
- sweeps build on the launch layer, never the other way round: no ``ppo.launch`` module imports ``ppo.sweep``;
- the modules of ``ppo/launch`` and ``ppo/sweep`` import each other without a cycle;
- every package of ``ppo`` sits in a layer (:data:`PACKAGE_LAYERS`) and imports only from the layers below it, so
  the packages form no cycle: pure math imports no data, the actors nothing of the loop, the loop nothing of the
  launcher;
- the modules of the training side import each other without a cycle.
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
"""The training side's packages, whose modules must not import each other in a cycle."""

PACKAGE_LAYERS = (
    ("ppo.atomic", "ppo.seeds", "ppo.hub"),
    ("ppo.algorithms", "ppo.metrics", "ppo.envs"),
    ("ppo.config", "ppo.data", "ppo.cluster", "ppo.models"),
    ("ppo.workers",),
    ("ppo.rollout",),
    ("ppo.loop",),
    ("ppo.experiment",),
    ("ppo.launch",),
    ("ppo.nightly",),
    ("ppo.sweep",),
)
"""Every package (and top-level module) of ``ppo``, lowest layer first; a package imports only from layers below
its own, never from its own layer's other packages or from above.  Bottom up: small helpers (atomic writes, seeds,
the HF cache); pure math, the metrics files, answer grading; configs, data, the cluster plan, the models; the actors
that own a model; collection (the engines and the generation actor, which ship batches with the actors' traffic
counting); the loop; the experiment a config builds; the launcher; the nightly suite; sweeps."""

def package_of(module: str) -> str:
    """``ppo.loop.trainer`` -> ``ppo.loop``; a top-level module (``ppo.experiment``) is a package of its own."""
    return ".".join(module.split(".")[:2])


def package_graph(root: Path) -> dict[tuple[str, str], list[str]]:
    """``{(package, imported package): ["module -> module", ...]}`` for every import of ``ppo`` between packages."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in import_graph(root, ("ppo",)).items():
        for target in sorted(targets):
            if package_of(target) != package_of(module) and package_of(module) != "ppo":
                edges.setdefault((package_of(module), package_of(target)), []).append(f"{module} -> {target}")
    return edges


def upward_imports(root: Path, layers=PACKAGE_LAYERS) -> dict[str, list[str]]:
    """The package imports that do not go to a lower layer, each with the module imports that make it; a package
    missing from ``layers`` is reported too (a new package must be placed)."""
    layer = {package: level for level, packages in enumerate(layers) for package in packages}
    wrong = {}
    for (source, target), via in package_graph(root).items():
        if source not in layer or target not in layer:
            wrong[f"{source} -> {target}"] = [f"{source if source not in layer else target} is in no layer"]
        elif layer[target] >= layer[source]:
            wrong[f"{source} -> {target}"] = via
    return wrong


def test_every_package_is_in_a_layer():
    packages = {package_of(module_name(p, REPO)) for p in (REPO / "ppo").rglob("*.py")} - {"ppo"}
    placed = {package for packages in PACKAGE_LAYERS for package in packages}
    assert packages - placed == set() and placed - packages == set()


def test_no_package_imports_from_its_own_layer_or_above():
    via = package_graph(REPO)[("ppo.loop", "ppo.rollout")]
    assert any(v.endswith(" -> ppo.rollout.collect") for v in via), via  # the walk saw the loop's imports
    assert upward_imports(REPO) == {}


def test_the_packages_import_each_other_without_a_cycle():
    edges = set(package_graph(REPO))
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    cycle = find_cycle(graph)
    assert cycle is None, "package import cycle: " + " -> ".join(cycle)


def test_the_layer_checks_find_an_upward_import_and_a_package_cycle(tmp_path):
    """The package checks on a small tree: an import from a lower layer to a higher one, inside a function, is
    reported with the module that makes it, and closes a cycle between the two packages."""
    files = {("__init__",): "", ("low", "__init__"): "", ("high", "__init__"): "",
             ("low", "math"): "def f():\n    from ppo.high import loop\n",
             ("high", "loop"): "from ppo.low import math\n"}
    for parts, text in files.items():
        path = tmp_path.joinpath("ppo", *parts).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    layers = (("ppo.low",), ("ppo.high",))
    assert upward_imports(tmp_path, layers) == {"ppo.low -> ppo.high": ["ppo.low.math -> ppo.high.loop"]}
    graph = {source: {target} for source, target in package_graph(tmp_path)}
    assert find_cycle(graph) == ["ppo.high", "ppo.low", "ppo.high"]
    tmp_path.joinpath("ppo", "low", "math.py").write_text("def f():\n    pass\n")
    assert upward_imports(tmp_path, layers) == {}


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
