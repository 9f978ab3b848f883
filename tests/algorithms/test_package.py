"""``ppo.algorithms`` loads its names on first use, so configuring an estimator imports no torch; every public name
still resolves to the same object as before, whatever was imported first."""

import importlib
import pkgutil
import subprocess
import sys

import ppo.algorithms as algorithms


def test_every_public_name_resolves_to_its_module_object():
    for name in algorithms.__all__:
        module = importlib.import_module(f"ppo.algorithms.{algorithms._EXPORTS[name]}")
        assert getattr(algorithms, name) is getattr(module, name), name


def test_no_submodule_is_named_like_an_exported_name():
    """Importing a submodule binds it on the package; one named like an export (a ``value_loss`` module beside the
    ``value_loss`` function) would shadow that export."""
    submodules = {module.name for module in pkgutil.iter_modules(algorithms.__path__)}
    assert not submodules & set(algorithms.__all__)


def test_estimator_configs_import_without_torch():
    code = ("import sys\nfrom ppo.algorithms import GAE, RawReward\nGAE(lam=0.9); RawReward()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numba')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "[]"
