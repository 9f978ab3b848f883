"""The device rule of the Megatron workers, checked on a CPU: every tensor that meets the model is on the worker's
``device``, and results come back on the CPU.

A CPU run cannot show a missing move by itself: the worker's device *is* the CPU there.  So the workers here run
with a stand-in accelerator:

- the workers' ``device`` is ``cuda:0`` (as on a GPU node), and ``cpu_compat.cuda_means("meta")`` sends every CUDA
  request (the workers' moves, ``build_gpt_model``'s, Megatron's own buffers) to torch's ``meta`` device, while the
  batch arrives on the CPU as it does from the driver;
- :class:`OneDevicePerOp` refuses any operation whose tensors sit on two devices, except the moves themselves.  It is
  stricter than CUDA, which accepts a CPU scalar tensor in a GPU operation: the rule is simply that what meets the
  model is on the worker's device.  Meta values read as zeros (``float()``, ``.cpu()``: :class:`MetaReadsAsZero`), so
  the whole real path runs: micro-batching, forward, loss, backward and Megatron's optimizer step.

:func:`test_every_move_is_needed` shows that the check catches the bug: it deletes each move from the workers'
source in turn (``to_device(x, self.device)`` → ``x``, ``x.to(self.device)`` → ``x``, ``device=self.device`` →
nothing, ``x.cpu()`` → ``x``), runs the path through the mutated method, and expects it to fail.
"""

from __future__ import annotations

import ast
import inspect
import os
import textwrap
import types

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ppo.workers.megatron_worker import MegatronWorker
from ppo.workers.policy import PolicyWorker
from ppo.workers.value import ValueWorker

pytestmark = pytest.mark.filterwarnings("ignore:.*copying from a non-meta parameter:UserWarning")

MOVES = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}


class DeviceRuleBroken(AssertionError):
    pass


class OneDevicePerOp(TorchDispatchMode):
    """Every operation's tensors on one device (moves excepted); a meta tensor copied to the CPU reads as zeros."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device for t in tensors}
        if func not in MOVES and len(devices) > 1:
            raise DeviceRuleBroken(f"{func} mixes devices {sorted(map(str, devices))}")
        if func.namespace == "c10d" and any(t.is_meta for t in tensors):
            return _collective_of_one(func, args, kwargs)
        if (func is torch.ops.aten._to_copy.default and tensors[0].is_meta
                and kwargs.get("device") == torch.device("cpu")):
            return torch.zeros(tensors[0].shape, dtype=kwargs.get("dtype") or tensors[0].dtype)
        return func(*args, **kwargs)


class MetaReadsAsZero(TorchFunctionMode):
    """Reading a meta tensor's values (``float()``, ``.item()``, ``.tolist()``) gives zeros: a loss, a gradient norm or
    a metric on the stand-in accelerator reads as 0."""

    READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__float__, torch.Tensor.__int__,
             torch.Tensor.__bool__, torch.tensor}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.READS:
            zeros = lambda x: torch.zeros(x.shape, dtype=x.dtype) if isinstance(x, torch.Tensor) and x.is_meta else x  # noqa: E731
            args = tree_map(zeros, args)
        return func(*args, **(kwargs or {}))


def _collective_of_one(func, args, kwargs):
    """A collective over meta tensors in a world of one: it changes no value, so it runs on CPU stand-ins (gloo has
    no meta kernels) and hands the meta tensors back."""
    assert torch.distributed.get_world_size() == 1
    stand_ins, originals = {}, {}
    for tensor in tree_flatten((args, kwargs))[0]:
        if isinstance(tensor, torch.Tensor) and tensor.is_meta:
            stand_in = torch.zeros(tensor.shape, dtype=tensor.dtype)
            stand_ins[id(tensor)], originals[id(stand_in)] = stand_in, tensor
    swap = lambda table: lambda x: table.get(id(x), x) if isinstance(x, torch.Tensor) else x  # noqa: E731
    return tree_map(swap(originals), func(*tree_map(swap(stand_ins), args), **tree_map(swap(stand_ins), kwargs)))


class _OnCuda:
    device = torch.device("cuda", 0)  # what MegatronWorker.device says on a GPU; cuda_means("meta") makes it meta


class CudaPolicy(_OnCuda, PolicyWorker):
    pass


class CudaValue(_OnCuda, ValueWorker):
    pass


@pytest.fixture(scope="module")
def stand_in_gpu():
    """The workers' CUDA is the meta device, and no operation may mix devices."""
    from ppo.models import cpu_compat

    cpu_compat.apply_if_needed()
    with cpu_compat.cuda_means("meta"), MetaReadsAsZero(), OneDevicePerOp():
        yield


@pytest.fixture(scope="module")
def workers(stand_in_gpu, tmp_path_factory):
    from ppo.cluster.ports import free_port
    from ppo.data.tokenizer import build_arithmetic_tokenizer
    from ppo.models.tiny import create_tiny_model
    from ppo.workers.specs import MegatronCritic, MegatronPolicy, PolicyLoss

    saved_env = dict(os.environ)
    model_dir = str(create_tiny_model(tmp_path_factory.mktemp("model"), build_arithmetic_tokenizer(), num_layers=2))
    common = dict(rank=0, world_size=1, master_addr="127.0.0.1", master_port=free_port(), seed=0)
    # a micro-batch budget of a few rows: several micro-batches, so rows are scattered back by index
    policy = CudaPolicy(MegatronPolicy(micro_batch_tokens=24, loss=PolicyLoss(kl_coef=0.1, nll_coef=0.1)), model_dir,
                        with_reference=True, **common)
    critic = CudaValue(MegatronCritic(micro_batch_tokens=24), model_dir, **common)
    yield policy, critic
    os.environ.clear()
    os.environ.update(saved_env)


def ppo_batch():
    """A batch as the driver sends it: on the CPU, rows of different lengths, every field the losses read."""
    from ppo.rollout.batch import build_rollout_batch
    from ppo.rollout.settings import Sample

    g = torch.Generator().manual_seed(0)
    prompts = [[3 + i, 4, 5 + i % 3][: 2 + i % 2] for i in range(6)]
    samples = [[Sample(list(range(3, 3 + n)), [-1.0] * n, "stop")] for n in (1, 4, 2, 5, 3, 2)]
    batch = build_rollout_batch(prompts, samples, pad_id=0, ground_truths=["0"] * len(prompts))
    mask = batch.response_mask
    for name in ("logp_old", "logp_ref", "values", "returns", "advantages"):
        setattr(batch, name, torch.randn(mask.shape, generator=g) * mask)
    batch.rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    return batch


def on_cpu(result):
    """``result`` (a tensor, or a step's metrics) as the driver receives it; raises if a tensor stayed on the device."""
    for value in tree_flatten(result)[0]:
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            raise DeviceRuleBroken(f"a result came back on {value.device}, not the CPU")
    return result


PATHS = {
    "policy logprobs": lambda policy, critic, batch: on_cpu(policy.logprobs(batch)),
    "reference logprobs": lambda policy, critic, batch: on_cpu(policy.logprobs(batch, reference=True)),
    "policy train": lambda policy, critic, batch: on_cpu(policy.train(batch, num_minibatches=2, seed=0)),
    "supervised step": lambda policy, critic, batch: on_cpu(policy.supervised_step(batch, lr=1e-4)),
    "critic values": lambda policy, critic, batch: on_cpu(critic.values(batch)),
    "critic train": lambda policy, critic, batch: on_cpu(critic.train(batch, num_minibatches=2, seed=0)),
}


@pytest.mark.parametrize("path", PATHS)
def test_every_path_keeps_the_device_rule(workers, path):
    batch = ppo_batch()
    result = PATHS[path](*workers, batch)
    if isinstance(result, torch.Tensor):
        assert result.shape == batch.input_ids.shape


# ------------------------------------------------------------------------------------ the check catches the bug
def _is_worker_device(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "device" and getattr(node.value, "id", None) == "self"


class _RemoveMove(ast.NodeTransformer):
    """Counts the moves in a function; with ``victim`` set, removes the move of that number."""

    def __init__(self, victim: int | None = None):
        self.victim, self.count = victim, 0

    def _is_victim(self) -> bool:
        self.count += 1
        return self.count - 1 == self.victim

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id == "to_device" and _is_worker_device(node.args[1]):
            return node.args[0] if self._is_victim() else node
        if isinstance(func, ast.Attribute) and func.attr == "to" and node.args and _is_worker_device(node.args[0]):
            return func.value if self._is_victim() else node
        if isinstance(func, ast.Attribute) and func.attr == "cpu" and not node.args:
            return func.value if self._is_victim() else node
        for keyword in node.keywords:
            if keyword.arg == "device" and _is_worker_device(keyword.value) and self._is_victim():
                node.keywords = [k for k in node.keywords if k is not keyword]
        return node


def _mutants(cls, name: str):
    """``(description, function)`` for each move of ``cls.name``, the function being the method without it."""
    function = inspect.unwrap(getattr(cls, name))  # the source below keeps its decorators
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    counter = _RemoveMove()
    counter.visit(tree)
    for victim in range(counter.count):
        mutated = ast.fix_missing_locations(_RemoveMove(victim).visit(ast.parse(textwrap.dedent(
            inspect.getsource(function)))))
        namespace = dict(function.__globals__)
        exec(compile(mutated, inspect.getsourcefile(function), "exec"), namespace)
        yield f"{cls.__name__}.{name}, move {victim + 1} of {counter.count}", namespace[name]


METHODS = [  # each method that moves tensors, and a path through it
    (MegatronWorker, "_cut", "policy logprobs"),
    (MegatronWorker, "_cut", "critic train"),
    (MegatronWorker, "forward_rows", "policy logprobs"),
    (MegatronWorker, "forward_rows", "critic values"),
    (PolicyWorker, "train", "policy train"),
    (PolicyWorker, "supervised_step", "supervised step"),
    (ValueWorker, "train", "critic train"),
]


@pytest.mark.parametrize("cls, name, path", METHODS, ids=[f"{c.__name__}.{n}-{p}" for c, n, p in METHODS])
def test_every_move_is_needed(workers, cls, name, path):
    policy, critic = workers
    worker = critic if path.startswith("critic") else policy
    mutants = list(_mutants(cls, name))
    assert mutants, f"no move found in {cls.__name__}.{name}"
    for description, mutant in mutants:
        setattr(worker, name, types.MethodType(mutant, worker))
        try:
            with pytest.raises(DeviceRuleBroken):
                PATHS[path](policy, critic, ppo_batch())
        except pytest.fail.Exception:
            raise AssertionError(f"{description} removed, yet {path} kept the device rule") from None
        finally:
            delattr(worker, name)
