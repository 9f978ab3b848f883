"""cpu_compat's import patch (6): megatron-core imported without ``torch.compile`` decorations and without wandb, in
a fresh process, as a worker imports it; the worker's CPU time for its imports is what the patch is for."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys
    import torch
    from ppo.models.cpu_compat import apply_if_needed

    assert apply_if_needed()
    from megatron.core import jit
    from megatron.core.fusions import fused_bias_geglu
    from megatron.core.transformer import utils

    print("wandb" in sys.modules, jit.jit_fuser is jit.noop_decorator,
          type(fused_bias_geglu.quick_gelu).__name__, type(utils.gelu_impl).__name__, torch.compile.__module__)
    import wandb  # still importable for the process's own use
    print(wandb.__name__)
""")


def test_megatron_is_imported_without_compile_decorations_or_wandb():
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    imported_wandb, fuser_off, geglu, gelu, compile_module = result.stdout.split("\n")[0].split()
    assert imported_wandb == "False", "megatron-core's optional wandb import ran"
    assert fuser_off == "True", "later jit_fuser decorations would compile"
    assert (geglu, gelu) == ("function", "function"), "torch.compile decorated megatron's fused functions"
    assert compile_module == "torch", "torch.compile is restored after the import"
    assert result.stdout.split("\n")[1] == "wandb"
