"""The project's import rule (``docs/architecture.md``): settings live in torch-free modules and the tensor code sits
beside them, importing torch at the top; packages re-export only what imports cheaply, never through a lazy
``__getattr__``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numba", "megatron", "ray", "vllm", "transformers")


def test_no_package_loads_names_lazily():
    lazy = [str(init.relative_to(ROOT)) for init in sorted((ROOT / "ppo").rglob("__init__.py"))
            if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                   for node in ast.parse(init.read_text()).body)]
    assert lazy == [], f"module-level __getattr__ in {lazy}: re-export eagerly, or import from the module"


def test_every_experiment_and_fiddler_prepares_without_heavy_imports():
    """What a dry run does to each shipped experiment file, with each of its fiddlers, in one fresh process."""
    code = f"""
import sys
from pathlib import Path
from ppo.config.loading import load_experiment
from ppo.launch.prepare import Request, prepare
checked = 0
for path in sorted(Path({str(ROOT / "experiments")!r}).glob("[!_]*.py")):
    for fiddlers in [[]] + [[name] for name in load_experiment(path).fiddler_names()]:
        prepare(Request(str(path), [], fiddlers, dry_run=True))
        checked += 1
print(checked, sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r})))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    checked, heavy = done.stdout.strip().split(" ", 1)
    assert int(checked) >= 10 and heavy == "[]", done.stdout


@pytest.mark.slow
def test_the_driver_imports_neither_megatron_nor_vllm():
    """The trainer names the worker classes; Megatron and vLLM load only in the worker processes that use them."""
    code = "import sys, ppo.loop.trainer; print(sorted({m.split('.')[0] for m in sys.modules} & {'megatron', 'vllm'}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout
