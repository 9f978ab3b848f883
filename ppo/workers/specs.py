"""What the policy and value worker groups build, as experiment components: plain dataclasses, no torch.

An experiment graph holds these (``fdl.Config(MegatronPolicy, parallel=..., optimizer=..., loss=...)``); the workers
(:mod:`ppo.workers.megatron_worker`, :mod:`ppo.workers.policy`, :mod:`ppo.workers.value`, which export these names
too) receive them and build the models in their own processes.  Keeping them here lets an experiment file, and
``launch.py --dry-run``, import them without torch or Megatron.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ppo.models.optim import OptimizerSettings
from ppo.models.parallel import ParallelConfig

if TYPE_CHECKING:
    import torch


@dataclass
class MegatronModelSpec:
    """What a Megatron worker group builds: parallel layout, optimizer, micro-batching, dtype."""

    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    data_parallel: int = 1  # replicas of the tensor × pipeline × context layout; each trains on its share of rows
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    micro_batch_tokens: int = 8192
    logprob_chunk_size: int = 1024
    dtype: str = "float32"
    num_threads: int | None = None

    @property
    def world_size(self) -> int:
        """Processes (GPUs) of the group: ``tensor × pipeline × context × data_parallel``."""
        return self.parallel.model_parallel_size * self.data_parallel

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[self.dtype]


@dataclass
class PolicyLoss:
    """The actor's loss settings (``ppo.algorithms.clipped_pg_loss``)."""

    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip_c: float | None = None
    aggregation: str = "token"
    ratio_level: str = "token"
    is_correction: str | None = None
    is_cap: float = 2.0
    is_low: float = 0.5
    kl_coef: float = 0.0  # KL to the reference policy as a loss term (0 = off, no reference model loaded)
    kl_kind: str = "k3"
    kl_on_policy_approx: bool = False
    nll_coef: float = 0.0  # VAPO positive-example NLL


@dataclass
class MegatronPolicy(MegatronModelSpec):
    """The actor: a Megatron model spec plus its loss."""

    loss: PolicyLoss = field(default_factory=PolicyLoss)


@dataclass
class MegatronCritic(MegatronModelSpec):
    """The critic: a Megatron model spec, its value-loss settings, and where its weights start.

    ``model_path=None`` starts from the policy's initial weights (after any warm start) with a random head.
    """

    model_path: str | None = None
    value_clip: float | None = 0.2
    value_loss_scale: float = 1.0
    head_init_std: float = 0.02
