"""``ppo.algorithms`` loads its names on first use, so configuring an estimator imports no torch; every public name
still resolves to the same object as before, whatever was imported first."""

import importlib
import subprocess
import sys

import ppo.algorithms as algorithms


def test_every_public_name_resolves_to_its_module_object():
    for name in algorithms.__all__:
        module = importlib.import_module(f"ppo.algorithms.{algorithms._EXPORTS[name]}")
        assert getattr(algorithms, name) is getattr(module, name), name


def test_value_loss_is_the_function_whatever_was_imported_first():
    import ppo.algorithms.critic_loss  # noqa: F401 - binds its submodule on the package, under another name

    assert callable(algorithms.value_loss) and algorithms.value_loss.__name__ == "value_loss"


def test_estimator_configs_import_without_torch():
    code = ("import sys\nfrom ppo.algorithms import GAE, RawReward\nGAE(lam=0.9); RawReward()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numba')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "[]"
