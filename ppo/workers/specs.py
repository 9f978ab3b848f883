"""What the policy and value worker groups build, as experiment components: plain dataclasses, no torch.

An experiment graph holds these (``fdl.Config(MegatronPolicy, parallel=..., optimizer=..., loss=...)``); the workers
(:mod:`ppo.workers.megatron_worker`, :mod:`ppo.workers.policy`, :mod:`ppo.workers.value`, which export these names
too) receive them and build the models in their own processes.  Keeping them here lets an experiment file, and
``launch.py --dry-run``, import them without torch or Megatron.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ppo.algorithms.options import PolicyLoss
from ppo.models import layers
from ppo.models.hub import parse_model_id
from ppo.models.optim import OptimizerSettings
from ppo.models.parallel import ParallelConfig
from ppo.models.recompute import Recompute


@dataclass
class MegatronModelSpec:
    """What a Megatron worker group builds: parallel layout, optimizer, micro-batching, dtype, layers, recompute.

    ``transformer_impl``: ``"local"`` (any machine) or ``"transformer_engine"`` (GPUs; flash attention), both with
    sequence parallelism, see :mod:`ppo.models.layers`.  ``recompute``: activation recomputation, see
    :mod:`ppo.models.recompute`.

    ``pad_to_multiple``: pad every micro-batch's width to a multiple of this as well (None: only what sequence
    parallelism needs, see :attr:`sequence_multiple`); tests use it to pad on CPU without sequence parallelism.
    """

    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    data_parallel: int = 1  # replicas of the tensor × pipeline × context layout; each trains on its share of rows
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    micro_batch_tokens: int = 8192
    pad_to_multiple: int | None = None
    logprob_chunk_size: int = 1024
    dtype: str = "float32"
    num_threads: int | None = None
    transformer_impl: str = layers.LOCAL
    recompute: Recompute = field(default_factory=Recompute)

    def check_model(self) -> None:
        """Raise ``ValueError`` (one line naming the setting) for layers or recomputation that cannot run; no
        software is needed here (Transformer Engine is checked where the model is built)."""
        layers.check(self.transformer_impl)
        self.recompute.check()

    def model_options(self) -> dict:
        """The keyword arguments of ``ppo.models.builder.build_gpt_model`` (and ``build_value_model``) that this
        spec sets; the worker adds its ``device``."""
        return dict(dtype=self.dtype, transformer_impl=self.transformer_impl, recompute=self.recompute,
                    sequence_parallel=self.parallel.sequence_parallel)

    @property
    def sequence_multiple(self) -> int:
        """What every micro-batch's width must divide by: ``parallel.tensor`` under sequence parallelism (Megatron
        splits the sequence over the TP ranks), else 1; the lcm with ``pad_to_multiple`` when that is set.  The
        workers pad micro-batches to it (:func:`ppo.data.batch.pad_width`)."""
        required = self.parallel.tensor if self.parallel.sequence_parallel else 1
        return math.lcm(required, self.pad_to_multiple or 1)

    def padded_length(self, tokens: int) -> int:
        """``tokens`` rounded up to :attr:`sequence_multiple`: the width a micro-batch of rows that long gets."""
        return -(-tokens // self.sequence_multiple) * self.sequence_multiple

    @property
    def world_size(self) -> int:
        """Processes (GPUs) of the group: ``tensor × pipeline × context × data_parallel``."""
        return self.parallel.model_parallel_size * self.data_parallel


@dataclass
class MegatronPolicy(MegatronModelSpec):
    """The actor: a Megatron model spec plus its loss."""

    loss: PolicyLoss = field(default_factory=PolicyLoss)


@dataclass
class MegatronCritic(MegatronModelSpec):
    """The critic: a Megatron model spec, its value-loss settings, and where its weights start.

    ``model_path=None`` starts from the policy's initial weights (after any warm start) with a random head.  To start
    from an earlier run's critic, give that run's checkpoint step directory (``<run>/checkpoints/step_N``, any
    parallel layout) or its HF export (``<run>/export/critic``, with ``trainer.export_hf=True``; any HF directory
    whose ``score.weight`` is a value head works too), or a hub id (``org/name[@revision]``, fetched by the launcher
    like ``model.path``: :mod:`ppo.models.hub`).  The optimizer starts fresh either way.
    """

    HUB_FIELDS = {"model_path": "model"}

    model_path: str | None = None
    value_clip: float | None = 0.2
    value_loss_scale: float = 1.0
    head_init_std: float = 0.02
    num_layers: int | None = None  # keep the first k transformer layers of the backbone it starts from (None: all)
    # torch threads while it trains beside the engines (trainer.critic_beside_generation), which need a core too;
    # None: num_threads
    num_threads_beside_generation: int | None = None
    # read each sample's reference answer before its prompt (ppo.rollout.critic_view): an asymmetric critic that
    # judges the answer so far against the reference; the policy never sees it
    reference_answer: bool = False

    def layers_of(self, model_layers: int) -> int:
        """The critic's transformer layers when the backbone it starts from has ``model_layers``; raises
        ``ValueError`` (one line) for a count the backbone cannot give.  The dry run and the worker both ask here."""
        if self.num_layers is None:
            return model_layers
        if not 1 <= self.num_layers <= model_layers:
            raise ValueError(f"critic.num_layers={self.num_layers} must be in [1, {model_layers}] (the layers of the "
                             "backbone the critic starts from)")
        return self.num_layers

    def init_checkpoint(self) -> str | None:
        """The Megatron checkpoint of the critic ``model_path`` names, when it names a run's checkpoint step."""
        if self.model_path is None:
            return None
        step = Path(self.model_path)
        return str(step / "critic") if (step / "trainer_state.json").is_file() and (step / "critic").is_dir() else None

    def missing_paths(self) -> list[str]:
        if self.model_path is None or parse_model_id(self.model_path) is not None:
            return []  # a hub id is the launcher's to fetch
        if self.init_checkpoint() or (Path(self.model_path) / "config.json").is_file():
            return []
        return [f"critic.model_path: {self.model_path} is neither an HF checkpoint directory (config.json) nor a run's "
                f"checkpoint step holding critic/"]
