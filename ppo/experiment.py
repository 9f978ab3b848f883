"""An experiment: the components of a PPO run, assembled by an experiment file's Fiddle graph.

``experiments/<recipe>.py`` returns ``fdl.Config(Experiment, ...)``; the launcher checks the built object, plans
its resources, and calls ``run(run_dir)`` in the driver process (locally or on SLURM node 0).  This module is
plain Python: Fiddle stays in ``ppo/config`` and ``ppo/launch``.  It imports no torch: the components are plain
dataclasses, and the trainer is imported by :meth:`Experiment.run`, so a dry run costs no more than the config.

Checks, before anything is launched:

- :meth:`Experiment.check`: the settings (ranges, batch divisibility, loss options, micro-batch budgets with
  the padding sequence parallelism needs, parallel layouts against the executor's ``nodes × gpus_per_node`` when
  it declares GPUs).
- :meth:`Experiment.missing_paths`: the input files (model checkpoint, data) that are not on this machine.  The
  launcher requires them where the run will read them from this machine's filesystem (see
  :func:`ppo.launch.prepare.paths_required`); :meth:`run` checks them again where the job runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppo.algorithms.estimators import GAE
from ppo.algorithms.options import KL_KINDS
from ppo.cluster.plan import (
    EngineLayout,
    GroupLayout,
    PlacementError,
    machine_cpus,
    machine_gpus,
    plan_placement,
    threads_per_process,
)
from ppo.envs.reward import RewardFunction
from ppo.loop.settings import PPOSettings, RewardShaping
from ppo.models.architecture import UnsupportedModelError
from ppo.rollout.settings import VLLMGeneration
from ppo.workers.memory import EngineMemory, GroupMemory, MemoryPlanError, plan_memory
from ppo.workers.specs import MegatronCritic, MegatronPolicy


def _leaves(obj, prefix: str = ""):
    """``(dotted path, value)`` of every plain value inside nested dataclasses, lists, tuples and dicts."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _leaves(getattr(obj, f.name), f"{prefix}{f.name}.")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _leaves(item, f"{prefix}{i}.")
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from _leaves(item, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), obj


_LAST_MEMORY_PLAN: list = []
"""The last :meth:`Experiment.memory_plan`: its inputs (compared by value) and the plan, which is only read."""


class ExperimentError(ValueError):
    """A configuration that cannot run; the message is one line naming the field and the fix."""


@dataclass
class Experiment:
    name: str
    model: Any  # ppo.models.sources.HFCheckpoint | TinyRandomModel
    task: Any  # ppo.data.tasks.ArithmeticTaskSpec | GSM8KTaskSpec | DAPOMathTaskSpec
    policy: MegatronPolicy = field(default_factory=MegatronPolicy)
    critic: MegatronCritic = field(default_factory=MegatronCritic)
    generation: VLLMGeneration = field(default_factory=lambda: VLLMGeneration(model_path=""))
    advantage: Any = field(default_factory=GAE)
    reward_shaping: RewardShaping = field(default_factory=RewardShaping)
    trainer: PPOSettings = field(default_factory=PPOSettings)
    executor: Any = None  # ppo.launch executors; None runs locally
    seed: int = 0
    colocated: bool = True  # policy, critic and vLLM share every GPU (taking turns); False: engines get their own
    allow_idle_gpus: bool = False  # accept a layout that leaves some of the job's GPUs without work
    reward: RewardFunction | None = None  # a reward function of your own instead of the math verifier

    @property
    def shape(self) -> tuple[int, int]:
        """``(nodes, gpus_per_node)`` of the job: what the executor declares (a local run: this machine's GPUs)."""
        if self.executor is None:
            return 1, machine_gpus()
        return self.executor.shape

    @property
    def gpus_per_node(self) -> int:
        return self.shape[1]

    @property
    def gpus(self) -> int:
        """GPUs of the whole job: ``nodes × gpus_per_node`` (0 on a CPU machine)."""
        nodes, per_node = self.shape
        return nodes * per_node

    def generation_for(self, model_path: Path) -> VLLMGeneration:
        """The engine settings pointed at the run's initial model (the graph may leave ``model_path`` empty)."""
        return dataclasses.replace(self.generation, model_path=str(model_path), seed=self.seed)

    def check(self) -> None:
        """Raise ``ExperimentError`` (one line) for settings that cannot run, before anything is launched."""
        def require(condition: bool, message: str) -> None:
            if not condition:
                raise ExperimentError(message)

        parts = [("model", self.model), ("task", self.task), ("trainer", self.trainer), ("reward", self.reward)]
        for name, part in [(name, part) for name, part in parts if part is not None]:
            try:
                part.check()
            except (ValueError, FileNotFoundError) as err:
                raise ExperimentError(f"{name}: {err}") from None
        self._check_numbers()
        sampling = self.generation.sampling
        require(sampling.temperature > 0, "generation.sampling.temperature must be > 0 for PPO rollouts")
        require(sampling.top_p == 1.0 and sampling.top_k == 0,
              "generation.sampling.top_p/top_k must be off (1.0/0) for PPO rollouts: vLLM's logprobs are renormalised "
              "after the filter but the trainer's recomputed logprobs are not, which biases the ratio")
        require(self.generation.max_model_len >= sampling.max_new_tokens,
              f"generation.max_model_len={self.generation.max_model_len} < sampling.max_new_tokens="
              f"{sampling.max_new_tokens}")
        longest = self.generation.max_model_len  # prompt + response never exceed the engine's context
        for group, spec in self._model_groups():
            require(spec.micro_batch_tokens >= longest,
                  f"{group}.micro_batch_tokens={spec.micro_batch_tokens} cannot hold one sample of up to "
                  f"generation.max_model_len={longest} tokens")
            require(spec.pad_to_multiple is None or spec.pad_to_multiple >= 1,
                  f"{group}.pad_to_multiple must be >= 1 (or None), got {spec.pad_to_multiple}")
            # every micro-batch is padded to a multiple of sequence_multiple (ppo.data.batch.pad_width), so a
            # row of max_model_len tokens takes padded_length(max_model_len) of the budget
            padded = spec.padded_length(longest)
            reasons = ([f"{group}.parallel.tensor={spec.parallel.tensor} with sequence parallelism"]
                       if spec.parallel.sequence_parallel else [])
            reasons += [f"{group}.pad_to_multiple={spec.pad_to_multiple}"] if spec.pad_to_multiple else []
            require(spec.micro_batch_tokens >= padded,
                  f"{group}.micro_batch_tokens={spec.micro_batch_tokens} cannot hold one sample of up to "
                  f"generation.max_model_len={longest} tokens padded to a multiple of {spec.sequence_multiple} "
                  f"({', '.join(reasons)}), {padded} tokens: set {group}.micro_batch_tokens >= {padded}")
        self._check_losses()
        self._check_layouts()
        trainer = self.trainer
        batch = trainer.prompts_per_step * trainer.generations_per_prompt
        for name in ("num_minibatches", "critic_minibatches"):
            count = getattr(trainer, name)
            require(count is None or batch % count == 0,
                  f"trainer.{name}={count} does not divide the batch of {batch} samples")
        if self.advantage.needs_critic is False and trainer.policy_training_start_step > 0:
            raise ExperimentError("trainer.policy_training_start_step > 0 (critic warmup) needs a critic-based "
                                  "estimator such as GAE")
        require(not trainer.dynamic_sampling or trainer.generations_per_prompt >= 2,
              "trainer.dynamic_sampling keeps prompt groups whose rewards differ, so it needs "
              "trainer.generations_per_prompt >= 2")
        estimator = type(self.advantage).__name__
        require(not getattr(self.advantage, "needs_groups", False) or trainer.generations_per_prompt >= 2,
              f"advantage: {estimator} compares each sample with the other samples of its prompt, so it needs "
              f"trainer.generations_per_prompt >= 2 (now {trainer.generations_per_prompt})")
        require(trainer.kl_in_reward_coef == 0 or getattr(self.advantage, "uses_token_rewards", True),
              f"trainer.kl_in_reward_coef={trainer.kl_in_reward_coef} puts KL in the per-token rewards, which "
              f"{estimator} ignores (it uses the sequence reward): use policy.loss.kl_coef (KL as a loss term), or "
              f"GAE / ReinforcePlusPlus")
        require(not self.reward_shaping.whiten_token_rewards or getattr(self.advantage, "uses_token_rewards", True),
              f"reward_shaping.whiten_token_rewards whitens the per-token rewards, which {estimator} ignores (it "
              f"uses the sequence reward): use GAE / ReinforcePlusPlus, or the estimator's own normalisation")
        require(trainer.kl_target is None or trainer.kl_in_reward_coef > 0,
              f"trainer.kl_target={trainer.kl_target} adapts the reward-KL coefficient, but "
              f"trainer.kl_in_reward_coef is 0: set it to the starting coefficient")
        require(self.critic.value_clip is None or self.critic.value_clip > 0,
              f"critic.value_clip must be > 0 (or None for an unclipped value loss), got {self.critic.value_clip}")
        loss = self.policy.loss
        require(loss.is_cap > 0, f"policy.loss.is_cap must be > 0, got {loss.is_cap}")
        require(0 <= loss.is_low <= loss.is_cap,
                f"policy.loss.is_low={loss.is_low} must be in [0, is_cap={loss.is_cap}]")
        shaping = self.reward_shaping
        require(not shaping.overlong_buffer or 0 < shaping.overlong_buffer <= sampling.max_new_tokens,
              f"reward_shaping.overlong_buffer={shaping.overlong_buffer} must be in (0, "
              f"generation.sampling.max_new_tokens={sampling.max_new_tokens}]")
        require(not shaping.scale or shaping.source_max > shaping.source_min,
              f"reward_shaping.source_max={shaping.source_max} must exceed source_min={shaping.source_min}")
        require(shaping.char_credit >= 0, f"reward_shaping.char_credit must be >= 0, got {shaping.char_credit}")
        require(not shaping.char_credit or getattr(self.task, "one_token_per_character", False),
              f"reward_shaping.char_credit credits each answer character on its own token, which needs a task whose "
              f"tokenizer writes one token per character (the arithmetic tasks), not {type(self.task).__name__}")

    def _check_numbers(self) -> None:
        """Every number in the experiment finite, and every seed one the run's generators accept."""
        for path, value in _leaves(self):
            if isinstance(value, float) and not math.isfinite(value):
                raise ExperimentError(f"config path '{path}' is {value}: give a finite number")
            if path.rpartition(".")[2].endswith("seed") and isinstance(value, int) and not 0 <= value < 2**32:
                raise ExperimentError(f"config path '{path}' must be in [0, 2**32), got {value} (numpy, torch and "
                                      f"vLLM derive their seeds from it)")

    def _model_groups(self) -> list[tuple[str, Any]]:
        """The Megatron worker groups this run builds: the policy, and the critic when the estimator needs one."""
        return [("policy", self.policy)] + ([("critic", self.critic)] if self.advantage.needs_critic else [])

    def _check_losses(self) -> None:
        loss = self.policy.loss
        try:
            loss.check()
        except ValueError as err:
            raise ExperimentError(f"policy.loss: {err}") from None
        if loss.kl_kind not in KL_KINDS:
            raise ExperimentError(f"policy.loss.kl_kind must be one of {', '.join(KL_KINDS)}, got {loss.kl_kind!r}")
        on_policy = not self.trainer.max_staleness  # off-policy, logp_old is the policy's own pass (the proximal)
        if self.trainer.old_logprobs == "engine" and loss.is_correction is not None and on_policy:
            raise ExperimentError(f"policy.loss.is_correction={loss.is_correction!r} corrects for the engine's "
                                  "logprobs differing from the policy's, but trainer.old_logprobs='engine' makes them "
                                  "the same: set is_correction=None, or old_logprobs='policy'")
        if loss.kl_coef > 0 and self.trainer.kl_in_reward_coef > 0:
            raise ExperimentError("KL is on twice: set either policy.loss.kl_coef (a loss term) or "
                                  "trainer.kl_in_reward_coef (in the reward), not both")

    def _check_layouts(self) -> None:
        """Parallel layouts: the placement plan on the executor's GPUs, and the model's shape against TP and PP."""
        if self.policy.parallel.pipeline != 1 or self.critic.parallel.pipeline != 1:
            raise ExperimentError("pipeline parallelism is not supported by the PPO workers yet: set "
                                  "parallel.pipeline=1")
        for group, spec in self._model_groups():
            try:
                spec.parallel.check(spec.world_size)
            except ValueError as err:
                raise ExperimentError(f"{group}.parallel: {err}") from None
            try:
                spec.check_model()
            except ValueError as err:
                raise ExperimentError(f"{group}.{err}") from None
        placement = self.placement_plan()
        if self.trainer.max_staleness and placement.colocated and not placement.cpu_only:
            raise ExperimentError(f"trainer.max_staleness={self.trainer.max_staleness} generates while the policy "
                                  "trains, which needs engines on GPUs of their own: set colocated=False")
        if self.trainer.critic_beside_generation and self.trainer.overlap_critic and self.advantage.needs_critic:
            raise ExperimentError("trainer.critic_beside_generation and trainer.overlap_critic both move the "
                                  "critic's updates: set one of them")
        self._check_architecture()
        plan = self.memory_plan()
        if plan is not None:
            try:
                plan.check()
            except MemoryPlanError as err:
                raise ExperimentError(f"memory: {err}") from None

    @property
    def gpu_memory_gib(self) -> float:
        """One GPU's memory, the memory plan's limit (``executor.gpu_memory_gib``; 80 without an executor)."""
        return getattr(self.executor, "gpu_memory_gib", 80.0)

    @property
    def host_memory_gib(self) -> float | None:
        """One node's memory, the host memory plan's limit (``executor.host_memory_gib``; None without an
        executor: not checked)."""
        return getattr(self.executor, "node_memory_gib", None)

    def memory_plan(self):
        """Bytes per GPU and phase (:func:`ppo.workers.memory.plan_memory`) for the job's placement plan, or None
        where there is nothing to plan: no GPUs (every rank a CPU process), or a model whose shape is not known here
        (no readable ``config.json`` and no ``model.config`` in the recipe)."""
        placement = self.placement_plan()
        found = None if placement.cpu_only else self._architecture()
        if found is None:
            return None
        arch, source = found
        reference = self.trainer.kl_in_reward_coef > 0 or self.policy.loss.kl_coef > 0
        groups = []
        for name, spec in self._model_groups():
            critic = name == "critic"
            layers = spec.layers_of(arch.num_layers) if critic and spec.model_path is None else None
            distributed = spec.optimizer.distributed_optimizer
            groups.append(GroupMemory(
                name=name, tensor=spec.parallel.tensor, data=spec.data_parallel, dtype=spec.dtype,
                distributed_optimizer=True if distributed is None else distributed,
                micro_batch_tokens=spec.micro_batch_tokens, sequence_parallel=spec.parallel.sequence_parallel,
                flash_attention=spec.transformer_impl == "transformer_engine", recompute=spec.recompute.granularity,
                recompute_method=spec.recompute.method, recompute_layers=spec.recompute.num_layers,
                logprob_chunk_size=spec.logprob_chunk_size, num_layers=layers, value_head=critic,
                reference=reference and not critic))
        gen = self.generation
        engine = EngineMemory(tensor=gen.tensor_parallel_size, dtype=gen.dtype,
                              gpu_memory_utilization=gen.gpu_memory_utilization, kv_cache_bytes=gen.kv_cache_bytes,
                              max_model_len=gen.max_model_len, max_num_seqs=gen.max_num_seqs,
                              refit_bucket_bytes=gen.refit_bucket_bytes)
        inputs = (placement, arch, groups, engine, self.gpu_memory_gib, source, self.host_memory_gib)
        if _LAST_MEMORY_PLAN and _LAST_MEMORY_PLAN[0] == inputs:
            return _LAST_MEMORY_PLAN[1]  # the dry run asks three times (check, node request, report)
        try:
            plan = plan_memory(placement, arch, groups, engine, gpu_memory_gib=self.gpu_memory_gib, source=source,
                               host_memory_gib=self.host_memory_gib)
        except MemoryPlanError as err:
            raise ExperimentError(f"memory: {err}") from None
        _LAST_MEMORY_PLAN[:] = [inputs, plan]
        return plan

    def node_request(self) -> tuple[int, int] | None:
        """``(CPUs, GiB of host memory)`` one node of the job needs, from the memory plan: a core for each worker
        process (Megatron and engine ranks), each math worker, the driver and Ray; the host memory the plan counts.
        None where there is no GPU plan."""
        plan = self.memory_plan()
        if plan is None:
            return None
        return plan.processes_per_node + self.trainer.math_workers + 2, math.ceil(plan.host_bytes / (1 << 30))

    def worker_threads(self, plan) -> int:
        """Threads for each worker process of ``plan`` (OMP, MKL and torch; a role's ``num_threads`` overrides it):
        the CPUs a node of the job has (``executor.cpus_per_task`` for SLURM, the CPUs this process may use
        otherwise) shared by the processes of its fullest node, counted as :meth:`node_request` counts them."""
        cpus = getattr(self.executor, "cpus_per_task", None) or machine_cpus()
        return threads_per_process(cpus, plan.worker_processes() + self.trainer.math_workers + 2)

    def placement_plan(self, nodes: int | None = None, gpus_per_node: int | None = None):
        """Where every rank runs (:func:`ppo.cluster.plan.plan_placement`) on ``nodes × gpus_per_node`` GPUs, by
        default the job's (:attr:`shape`); the dry run prints it, and the trainer reserves Ray placement groups from
        it after checking its Ray cluster has that shape."""
        groups = [GroupLayout(name, spec.parallel.tensor, spec.parallel.context, spec.parallel.pipeline,
                              spec.data_parallel) for name, spec in self._model_groups()]
        try:
            return plan_placement(
                nodes=self.shape[0] if nodes is None else nodes,
                gpus_per_node=self.shape[1] if gpus_per_node is None else gpus_per_node,
                groups=groups,
                generation=EngineLayout(self.generation.num_engines, self.generation.tensor_parallel_size),
                colocated=self.colocated, allow_idle_gpus=self.allow_idle_gpus)
        except PlacementError as err:
            raise ExperimentError(str(err)) from None

    def critic_trains_beside_generation(self, plan) -> bool:
        """Whether the critic's updates run while the engines generate (``trainer.critic_beside_generation``): only
        where every rank is a CPU process.  On GPUs the trainer gives the devices to the engines during generation
        (the critic is offloaded), so there the critic trains in order."""
        return self.trainer.critic_beside_generation and self.advantage.needs_critic and plan.cpu_only

    def _architecture(self):
        """``(Architecture, where its fields came from)`` of the model when known here (see
        :meth:`ppo.models.sources.HFCheckpoint.architecture`), else None; one line for a model the workers cannot
        convert."""
        if not hasattr(self.model, "architecture"):
            return None
        try:
            return self.model.architecture(self.task)
        except UnsupportedModelError as err:
            raise ExperimentError(f"model: {err}") from None

    def _check_architecture(self) -> None:
        """A model the workers can convert, with heads, KV groups, FFN width and vocabulary divisible by each group's
        TP and layers by PP, when the model's shape is known here (a readable ``config.json``, the recipe's
        ``model.config``, or a model the run generates)."""
        self._architecture()
        shape = self.model.shape(self.task) if hasattr(self.model, "shape") else None
        if shape is None:
            return
        layers = shape.get("num_hidden_layers")

        def layers_of(group: str, spec) -> tuple[int | None, str]:
            """The group's layers, and whose they are: a critic of ``critic.num_layers`` keeps fewer than the model."""
            if group != "critic" or layers is None or spec.model_path is not None:
                return layers, "model"
            try:
                return spec.layers_of(layers), "critic"
            except ValueError as err:
                raise ExperimentError(str(err)) from None

        layouts = [(f"{group}.parallel.tensor", spec.parallel.tensor, spec.parallel.pipeline, *layers_of(group, spec))
                   for group, spec in self._model_groups()]
        layouts.append(("generation.tensor_parallel_size", self.generation.tensor_parallel_size, 1, layers, "model"))
        for setting, tp, pp, count, whose in layouts:
            for name in ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size"):
                value = shape.get(name)
                if value is not None and value % tp:
                    raise ExperimentError(f"{setting}={tp} does not divide the model's {name}={value}")
            if pp > 1 and count is not None and count % pp:
                raise ExperimentError(f"{setting.replace('tensor', 'pipeline')}={pp} does not divide the {whose}'s "
                                      f"num_hidden_layers={count}")

    def input_parts(self) -> list[tuple[str, Any]]:
        """``(config path, component)`` of every component that reads inputs: model, task, trainer (its resume
        checkpoint), and the critic where the advantage estimator uses one."""
        parts = [("model", self.model), ("task", self.task), ("trainer", self.trainer)]
        return parts + ([("critic", self.critic)] if self.advantage.needs_critic else [])

    def missing_paths(self) -> list[str]:
        """The input files the run reads that are not on this machine, one line each (``model: ...``).

        A component that reads files says which are missing with its own ``missing_paths()``; hub ids are left to the
        launcher, which fetches them (:mod:`ppo.launch.fetch`).
        """
        problems = []
        for name, part in self.input_parts():
            lines = getattr(part, "missing_paths", list)()
            problems += lines if name == "critic" else [f"{name}: {line}" for line in lines]
        return problems

    def check_inputs(self) -> None:
        """Raise ``ValueError`` (one line) for an input file that is here but lacks a column the run reads."""
        for _, part in self.input_parts():
            getattr(part, "check_columns", lambda: None)()

    def check_paths(self) -> None:
        """Raise ``ExperimentError`` naming the first missing input (and how many more there are)."""
        problems = self.missing_paths()
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise ExperimentError(problems[0] + more)

    def resource_plan(self) -> list[dict]:
        """Worker groups and what they hold, for dry runs (where each rank runs: :meth:`placement_plan`)."""
        plan = [{"group": "policy", "processes": self.policy.world_size, **dataclasses.asdict(self.policy.parallel),
                 "data": self.policy.data_parallel}]
        if self.advantage.needs_critic:
            plan.append({"group": "critic", "processes": self.critic.world_size,
                         **dataclasses.asdict(self.critic.parallel), "data": self.critic.data_parallel})
        plan.append({"group": "generation", "processes": self.generation.num_engines
                     * self.generation.tensor_parallel_size, "tensor": self.generation.tensor_parallel_size,
                     "engines": self.generation.num_engines})
        return plan

    def run(self, run_dir: Path, should_stop=None) -> str:
        """Train in ``run_dir`` (resuming from its latest checkpoint), after checking the inputs are here.  Returns
        ``"completed"``, or ``"stopped"`` when ``should_stop()`` turned true (after checkpointing the step)."""
        self.check_paths()
        from ppo.loop.trainer import PPOTrainer

        return PPOTrainer(self, Path(run_dir)).run(should_stop)
