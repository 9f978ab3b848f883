"""Fiddle imported without libcst and absl.logging (``ppo.config.fiddle_import``): neither loads with Fiddle, and once
something uses them Fiddle is as its own import leaves it.

Each case runs in a fresh process (the import of Fiddle is what is tested).  The reference is a process that imports
libcst and absl.logging before Fiddle, so that ``fiddle/__init__`` runs as it does without this project (the finder
leaves alone what is already imported)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STATE = """
import json, sys
import fiddle as fdl
from fiddle.experimental import auto_config
from fiddle._src.experimental import auto_config as ac
from fiddle._src import reraised_exception as rr

def add(x=1, y=2):
    return x + y

made = auto_config.auto_config(lambda: fdl.Config(add, x=3))  # auto_config on a lambda: libcst finds its source
config = made.as_buildable()
verbosity = rr.logging.get_verbosity()  # what reraised_exception logs with
finder = ac._LambdaFinder
print(json.dumps({
    "verbosity": verbosity,
    "config": repr(config),
    "built": fdl.build(config),
    "lambda_source": ac._getsource_for_lambda(lambda: add(y=4)),
    "mro": [f"{c.__module__}.{c.__qualname__}" for c in finder.__mro__],
    "metaclass": type(finder).__qualname__,
    "dependencies": [f"{c.__module__}.{c.__qualname__}" for c in finder.get_inherited_dependencies()],
    "cst_is_libcst": ac.cst is sys.modules["libcst"],
    "logging_is_absl": rr.logging is sys.modules["absl.logging"],
    "absl_logging": getattr(sys.modules["absl"], "logging", None) is sys.modules["absl.logging"],
}, sort_keys=True))
"""


def _run(code: str, folder: Path) -> str:
    """The last line ``code`` prints, run from a file (auto_config reads a lambda's source from it)."""
    script = folder / f"probe_{len(list(folder.iterdir()))}.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_fiddle_imports_without_libcst_nor_absl_logging(tmp_path):
    loaded = _run("import sys, ppo, fiddle, ppo.config.loading, ppo.config.serialization\n"
                  "print(sorted(m for m in ('libcst', 'absl.logging') if m in sys.modules))", tmp_path)
    assert loaded == "[]"


def test_fiddle_used_after_a_deferred_import_is_fiddle_after_a_plain_one(tmp_path):
    deferred = json.loads(_run("import ppo\n" + STATE, tmp_path))
    plain = json.loads(_run("import libcst, absl.logging\nimport ppo\n" + STATE, tmp_path))
    assert plain["mro"][1] == "libcst._visitors.CSTVisitor" and plain["built"] == 5  # the reference is real Fiddle
    assert deferred == plain


def test_a_fiddle_that_reads_more_of_a_stand_in_is_imported_with_the_real_packages(tmp_path):
    """The fallback: a stand-in that lacks a name Fiddle reads at import (here libcst's ``metadata``, taken away)
    makes the finder import Fiddle again with the real libcst."""
    code = ("import ppo.config.fiddle_import as fi\n"
            "make, finish = fi.STAND_INS['libcst']\n"
            "def lacking():\n    module = make()\n    del module.metadata\n    return module\n"
            "fi.STAND_INS['libcst'] = (lacking, finish)\n" + STATE)
    fallback = json.loads(_run(code, tmp_path))
    plain = json.loads(_run("import libcst, absl.logging\nimport ppo\n" + STATE, tmp_path))
    assert fallback == plain
