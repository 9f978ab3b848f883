"""Make megatron-core 0.16.1 run on a CPU-only torch (gloo), so every test exercises the real Megatron code.

Applied by ``apply_if_needed()`` only when CUDA is absent; on GPUs it does nothing.  Nothing else in the project
knows about these patches.  Each one and why:

1. **device "cuda" → "cpu"** — megatron-core creates tensors with ``device="cuda"`` or
   ``device=torch.cuda.current_device()`` (an int, i.e. cuda:N) in rotary embeddings, TP buffers, the pipeline
   schedules (even PP=1's ``forward_backward_no_pipelining``), grad clipping and the optimizer's scale tensors.
   A process-wide ``TorchFunctionMode`` rewrites any CUDA device argument to the CPU, and ``Tensor.cuda()``
   becomes a no-op.
2. **RNG tracker** — ``model_parallel_cuda_manual_seed`` and the tracker's ``fork()`` save and swap CUDA generator
   states; on CPU they use the CPU generator's state instead (same semantics: a separate stream per TP rank).
3. **synchronize / current_device** — ``torch.cuda.synchronize`` (p2p communication) becomes a no-op and
   ``torch.cuda.current_device`` returns 0 without initialising CUDA.
4. **type checks** — grad clipping asserts ``param.grad.type() == 'torch.cuda.FloatTensor'`` and the
   distributed optimizer type-checks ``torch.cuda.*Tensor``; ``Tensor.type()`` reports CPU tensors under their
   CUDA names while the mode is active.
5. **backward** — autograd runs a custom ``Function``'s ``backward`` without the mode of patch 1, and Megatron's
   allocate there on ``torch.cuda.current_device()``: the sequence-parallel gathers and reduce-scatters
   (``tensor_parallel.mappings``) and the linear layers' backward under sequence parallelism.  Every custom
   ``backward`` runs under the mode too.

Patch 1 also makes a worker's ``.to("cuda")`` land on the CPU, where the batch already is, so a CPU run cannot show
a missing move of a batch to the GPU.  :func:`cuda_means` sends CUDA requests to a stand-in device instead, where a
tensor left on the CPU raises: ``tests/workers/test_device_placement.py`` uses it.

6. **import** — megatron-core is imported here, first, with its ``jit_fuser`` decorator (``torch.compile`` on torch
   >= 2.2) applied as the identity and without wandb (which it imports only for its inference engine's logging).
   The functions so decorated run eagerly, the same arithmetic without a compiled kernel (the builder turns the bias
   fusions off anyway).  A worker process that imports megatron-core, builds a model, takes an
   optimizer step and saves a checkpoint spends ~25 % less CPU (``bench/worker_start.py``); torch's
   optimizer still imports ``torch._dynamo`` on its own.  ``tests/models/test_cpu_compat.py`` checks the import.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

_applied = False


def _is_cuda(device) -> bool:
    if isinstance(device, int):
        return True
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.startswith("cuda")


class _CudaToCpu(TorchFunctionMode):
    target = torch.device("cpu")  # where a CUDA request goes; see cuda_means()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = self.target
        if func is torch.Tensor.cuda:
            return args[0].to(self.target)
        if func is torch.Tensor.to:
            args = tuple(self.target if i > 0 and _is_cuda(a) and not isinstance(a, int) else a
                         for i, a in enumerate(args))
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = func(*args).replace("torch.meta.", "torch.", 1)  # the stand-in accelerator of cuda_means("meta")
            return name.replace("torch.", "torch.cuda.", 1) if not name.startswith("torch.cuda.") else name
        return func(*args, **kwargs)


_MODE = _CudaToCpu()


def _identity_compile(model=None, **_options):
    return model if model is not None else (lambda fn: fn)


def _import_megatron_eagerly() -> None:
    if "megatron.core" in sys.modules:
        return
    compile_, wandb = torch.compile, sys.modules.get("wandb")
    torch.compile = _identity_compile
    if wandb is None:
        sys.modules["wandb"] = None  # an ImportError for megatron-core's optional import
    try:
        import megatron.core  # noqa: F401
        from megatron.core import jit

        jit.disable_jit_fuser()  # decorators run after this import stay the identity too
    finally:
        torch.compile = compile_
        if wandb is None:
            del sys.modules["wandb"]


def _patch_rng() -> None:
    from megatron.core.tensor_parallel import random as mp_random

    def get_state(*_args, **_kwargs):
        return torch.get_rng_state()

    def set_state(state, *_args, **_kwargs):
        torch.set_rng_state(state)

    def add(self, name, seed):
        if seed in self.seeds_:
            raise Exception(f"seed {seed} already exists")
        self.seeds_.add(seed)
        if name in self.states_:
            raise Exception(f"rng state {name} already exists")
        original = torch.get_rng_state()
        torch.manual_seed(seed)
        self.states_[name] = torch.get_rng_state()
        torch.set_rng_state(original)

    mp_random._get_cuda_rng_state = get_state
    mp_random._set_cuda_rng_state = set_state
    mp_random.CudaRNGStatesTracker.add = add


def _patch_backward() -> None:
    from torch.autograd.function import BackwardCFunction

    original = BackwardCFunction.apply

    def apply(self, *args):
        if _MODE in _get_current_function_mode_stack():
            return original(self, *args)
        with _MODE:
            return original(self, *args)

    BackwardCFunction.apply = apply


def apply_if_needed() -> bool:
    """Install the patches once per process when CUDA is unavailable; returns whether they are active."""
    global _applied
    if _applied:
        return True
    if torch.cuda.is_available():
        return False
    _import_megatron_eagerly()
    _patch_rng()
    _patch_backward()
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: 0
    _MODE.__enter__()
    _applied = True
    return True


@contextmanager
def cuda_means(device: str | torch.device) -> Iterator[None]:
    """Inside the block, what asks for CUDA gets ``device`` instead of the CPU (patch 1's target; needs the patches).

    ``tests/workers/test_device_placement.py`` points it at ``"meta"``: the workers' ``.to(cuda)`` and Megatron's
    own CUDA tensors then land on one stand-in accelerator, apart from the CPU.
    """
    if not _applied:
        raise RuntimeError("cpu_compat.cuda_means() needs the CPU patches "
                           "(apply_if_needed() on a machine without CUDA)")
    saved, _MODE.target = _MODE.target, torch.device(device)
    try:
        yield
    finally:
        _MODE.target = saved
