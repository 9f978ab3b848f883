"""A worker process's torch.distributed world and Megatron's process groups, from its ``ParallelConfig``."""

from __future__ import annotations

import os

import torch

from ppo.models.cpu_compat import apply_if_needed
from ppo.models.parallel import ParallelConfig


def initialize(parallel: ParallelConfig, *, seed: int = 0) -> None:
    """Join the torch.distributed world from the environment (NCCL on GPUs, gloo on CPU) and set Megatron's groups.

    Expects ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (torchrun, Ray workers or a test harness);
    a lone process with none of them becomes a world of one on 127.0.0.1.
    """
    apply_if_needed()  # before megatron-core's first import (cpu_compat, patch 6)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import random as mp_random

    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        rank, world = int(os.environ.setdefault("RANK", "0")), int(os.environ.setdefault("WORLD_SIZE", "1"))
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count())))
        torch.distributed.init_process_group(backend, rank=rank, world_size=world)
    parallel.check(torch.distributed.get_world_size())
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=parallel.tensor,
        pipeline_model_parallel_size=parallel.pipeline,
        context_parallel_size=parallel.context,
    )
    torch.manual_seed(seed)  # CPU-initialised weights draw from the default generator
    mp_random.model_parallel_cuda_manual_seed(seed)  # through the module: cpu_compat patches its helpers
