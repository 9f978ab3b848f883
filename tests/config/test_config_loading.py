import sys
import textwrap

import fiddle as fdl
import pytest

from ppo.config.errors import ConfigError
from ppo.config.loading import load_experiment, load_module, module_name_for

GOOD = """
import fiddle as fdl
from tests.config.graphs import Optimizer

NIGHTLY = {"step": 4, "checks": ['data["train/reward"]["4"] > 0.5']}

def config():
    return fdl.Config(Optimizer, lr=0.5)

def double_lr(cfg):
    cfg.lr = cfg.lr * 2

def broken(cfg):
    raise KeyError("no such part")

def _private(cfg):
    pass

def two_args(a, b):
    pass
"""


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_loads_config_nightly_and_fiddlers(tmp_path):
    loaded = load_experiment(write(tmp_path / "exp_good.py", GOOD))
    cfg = loaded.config()
    assert isinstance(cfg, fdl.Config) and cfg.lr == 0.5
    assert loaded.nightly["step"] == 4
    assert loaded.fiddler_names() == ["double_lr", "broken"]
    loaded.apply_fiddler(cfg, "double_lr")
    assert cfg.lr == 1.0


def test_files_in_a_package_import_their_siblings(tmp_path):
    write(tmp_path / "recipes_pkg" / "__init__.py", "")
    write(tmp_path / "recipes_pkg" / "base.py", "LR = 0.125\n")
    path = write(tmp_path / "recipes_pkg" / "small.py", """
        import fiddle as fdl
        from recipes_pkg import base
        from tests.config.graphs import Optimizer

        def config():
            return fdl.Config(Optimizer, lr=base.LR)
        """)
    loaded = load_experiment(path)
    assert loaded.module_name == "recipes_pkg.small" and loaded.config().lr == 0.125
    assert sys.modules["recipes_pkg.small"] is loaded.module
    assert module_name_for(path) == ("recipes_pkg.small", [str(tmp_path)])


def test_module_name_for_a_loose_file(tmp_path):
    path = write(tmp_path / "loose" / "exp_loose.py", GOOD)
    assert module_name_for(path) == ("exp_loose", [str(tmp_path), str(tmp_path / "loose")])


@pytest.mark.parametrize("name, text, message", [
    ("syntax.py", "def config(:\n    pass\n", r"syntax.py:1: importing the file raised SyntaxError: "),
    ("imports.py", "\n\nimport not_a_module_anywhere\n",
     r"imports.py:3: importing the file raised ModuleNotFoundError: No module named 'not_a_module_anywhere'"),
    ("noconfig.py", "X = 1\n", r"noconfig.py defines no config\(\) function"),
    ("raises.py", "def config():\n    return {}['policy']\n", r"raises.py:2: config\(\) raised KeyError: 'policy'"),
    ("returns.py", "def config():\n    return {'lr': 1}\n", r"returns.py: config\(\) returned dict, expected an fdl"),
    ("sweep.py", "SWEEP = {}\ndef config():\n    pass\n",
     r"sweep.py is a sweep file \(it defines SWEEP\), not an experiment: run it with python launch.py "),
    ("nightly1.py", "NIGHTLY = [1]\n", r"nightly1.py: NIGHTLY must be a dict"),
    ("nightly2.py", "NIGHTLY = {'step': -1, 'checks': []}\n", r"NIGHTLY\['step'\] must be a non-negative int"),
    ("nightly3.py", "NIGHTLY = {'step': 1, 'checks': ['x ** 2 > 1']}\n", r"NIGHTLY\['checks'\]\[0\]: "),
])
def test_loader_errors_are_one_line(tmp_path, name, text, message):
    path = write(tmp_path / "bad" / name, text)
    with pytest.raises(ConfigError, match=message) as err:
        loaded = load_experiment(path)
        loaded.nightly  # noqa: B018
        loaded.config()
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)


def test_missing_and_non_python_files(tmp_path):
    with pytest.raises(ConfigError, match="no such experiment file: .*nothere.py"):
        load_module(tmp_path / "nothere.py")
    with pytest.raises(ConfigError, match="is not a Python file"):
        load_module(write(tmp_path / "notes.txt", "hi"))


def test_fiddler_errors(tmp_path):
    loaded = load_experiment(write(tmp_path / "exp_fiddlers.py", GOOD))
    with pytest.raises(ConfigError, match="has no fiddler 'double_lrr'; did you mean 'double_lr'"):
        loaded.fiddler("double_lrr")
    with pytest.raises(ConfigError, match=r"has no fiddler 'zzz' \(fiddlers: double_lr, broken\)"):
        loaded.fiddler("zzz")
    with pytest.raises(ConfigError, match=r"exp_fiddlers.py:14: fiddler broken\(\) raised KeyError: 'no such part'"):
        loaded.apply_fiddler(loaded.config(), "broken")
