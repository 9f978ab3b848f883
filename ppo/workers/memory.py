"""The memory plan: bytes on every GPU of the job in every phase of a step.  Pure Python: no torch, no Ray.

It stands beside the placement plan (:mod:`ppo.cluster.plan`) and follows the same rule: one function,
:func:`plan_memory`, serves the dry run (``launch.py --dry-run`` prints it under the GPU map), validation (a layout
whose peak exceeds ``executor.gpu_memory_gib`` is refused in one line naming the phase and what to change) and the
run, whose refit walks the very steps (:data:`REFIT_STEPS`) this plan sums memory over.

What a GPU holds (a slot of the placement plan holds some policy, critic and engine ranks):

- a Megatron rank: its weights (the tensor-parallel shard, in the model's dtype), gradients (Megatron DDP's buffer:
  fp32, ``grad_reduce_in_fp32``, never sharded), Adam state (fp32 master copy unless the weights are fp32, plus two
  moments: 12 or 8 bytes a parameter, divided over the data-parallel ranks by the distributed optimizer), the frozen
  reference model of a policy with a KL term, and activations (Korthikanti et al. 2022, per layer, with recompute);
- a vLLM engine rank: its weight shard and a KV cache, which vLLM sizes to ``gpu_memory_utilization × GPU`` minus the
  weights and its profiling peak (or ``kv_cache_bytes`` when given);
- every process a CUDA context (:data:`CUDA_CONTEXT_BYTES`, an assumption until a GPU measures it), the engine
  actor of an engine of TP > 1 included (it sees the engine's GPUs and holds a context on the first);
- every NCCL communicator a rank uses (:data:`NCCL_COMMUNICATOR_BYTES`): Megatron's tensor- and data-parallel
  groups, a vLLM engine's tensor-parallel group, the refit's broadcast group; they stay whatever is offloaded;
- on a GPU that receives the refit by broadcast, one bucket's receiving buffer, kept by the receiving process's
  PyTorch cache after the first refit.

The host half (:mod:`ppo.workers.host_memory`): each node's CPU memory per phase, start-up included; the dry run
prints the worst as ``host memory: X GiB of Y GiB (phase, node)`` and validation refuses more than
``executor.host_memory_gib``.

Phases (the step order of the trainer, ``ppo/loop/trainer.py``):

- ``generation``: engines awake; Megatron ranks offloaded (only their contexts stay);
- ``logprobs/values``: engines asleep; every Megatron rank onloaded; one forward pass at a time;
- ``training``: the same, plus the training activations of the group that trains (policy and critic train in turn);
- ``refit``: the walk through :data:`REFIT_STEPS` (NeMo-RL's and verl's order): the critic and the policy's training
  state go to host memory, then vLLM wakes its weights only, the policy streams them in buckets, the policy's weights
  go too, and only then does the KV cache wake.

Numbers marked [C] in ``../shared/notes/memory.md`` are arithmetic, not measurements; ``bench/gpu_smoke.py`` compares
the Megatron phases with a GPU's allocator when one is lent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ppo.models.architecture import Architecture
from ppo.workers.host_memory import (
    HOST_PHASES,
    add_parts,
    engine_rank_host,
    megatron_rank_host,
    process_parts,
)

GIB = 1 << 30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CUDA_CONTEXT_BYTES = GIB // 2
"""What a process that uses a GPU keeps there whatever it does (CUDA context, cuBLAS workspace).
An assumption: vLLM logs on H100s show 0.12-0.65 GiB of non-torch memory per process."""
NCCL_COMMUNICATOR_BYTES = GIB // 2
"""GPU memory of one NCCL communicator once used (its channels' buffers: NCCL_BUFFSIZE, 4 MiB, per channel,
protocol and peer, up to 32 channels over NVLink; more with NVLS).  An assumption until several GPUs measure it;
communicators are created at their first collective and kept."""
CHECKPOINT_DTYPE = "bfloat16"  # the dtype the supported models' HF checkpoints are published in
VLLM_DEFAULT_BATCHED_TOKENS = 16384  # vLLM's max_num_batched_tokens for the offline LLM class on H100s
VLLM_DEFAULT_MAX_SEQS = 1024

REFIT_STEPS = (
    ("critic", "offload"),  # critic weights, gradients and optimizer state to host memory
    ("policy", "offload_state"),  # the policy's gradients, optimizer state and reference; its weights stay
    ("engines", "wake_weights"),  # vLLM maps its weights only; no KV cache yet
    ("refit", "stream"),  # the policy ranks gather their shards and stream HF-named buckets to the engines
    ("policy", "offload"),  # the policy's weights too
    ("engines", "wake_kv_cache"),  # now the KV cache: the GPU belongs to generation
)
"""The refit, step by step: the loop performs exactly these (``ppo.loop.gpu_turns.GpuTurns.refit``) and the plan
sums the bytes after each.  Waking vLLM whole while the trainer still held everything is what ran dsr1_7b out of
memory on paper."""

PHASES = ("generation", "logprobs/values", "training", "refit")


class MemoryPlanError(ValueError):
    """A layout whose peak does not fit in the GPU; the message names the phase, the GPU and the setting to change."""


@dataclass(frozen=True)
class GroupMemory:
    """A Megatron group's settings that decide its memory (``ppo.workers.specs.MegatronModelSpec`` and friends)."""

    name: str  # "policy" or "critic"
    tensor: int
    data: int
    dtype: str
    distributed_optimizer: bool
    micro_batch_tokens: int
    sequence_parallel: bool = False
    flash_attention: bool = True  # Transformer Engine's layers; the local spec keeps the T × T scores
    recompute: str | None = None  # None, "selective" or "full"
    recompute_method: str | None = None
    recompute_layers: int | None = None
    logprob_chunk_size: int = 1024
    num_layers: int | None = None  # the critic may keep fewer layers than the model
    value_head: bool = False
    reference: bool = False  # a policy with a KL term keeps a frozen reference copy


@dataclass(frozen=True)
class EngineMemory:
    """A vLLM engine's settings that decide its memory (``ppo.rollout.settings.VLLMGeneration``)."""

    tensor: int
    dtype: str
    gpu_memory_utilization: float
    kv_cache_bytes: int | None
    max_model_len: int
    max_num_seqs: int | None = None
    refit_bucket_bytes: int = 512 << 20


@dataclass
class GPUMemory:
    """One GPU's bytes per phase, each phase a dict ``part -> bytes`` (parts like ``policy weights``)."""

    slot: str  # "node0/gpu3"
    phases: dict[str, dict[str, int]] = field(default_factory=dict)

    def total(self, phase: str) -> int:
        return sum(self.phases[phase].values())


@dataclass
class MemoryPlan:
    gpu_bytes: int
    gpus: list[GPUMemory]
    source: str  # where the model's shape came from: "config.json" or "the recipe"
    kv_tokens: int | None = None  # tokens an engine's KV cache holds (each rank holds its heads of every token)
    host_nodes: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # node -> phase -> part -> bytes
    host_limit: int | None = None  # executor.host_memory_gib in bytes; None: not checked
    processes_per_node: int = 0  # worker processes on the fullest node (PlacementPlan.worker_processes)

    def host_peak(self) -> tuple[int, str, str]:
        """``(bytes, phase, node)`` of the fullest node in its fullest phase (the first among equals)."""
        best = (0, "", "")
        for node, phases in self.host_nodes.items():
            for phase, parts in phases.items():
                if sum(parts.values()) > best[0]:
                    best = (sum(parts.values()), phase, node)
        return best

    @property
    def host_bytes(self) -> int:
        """Host memory of the fullest node in its fullest phase: what a job on shared nodes asks SLURM for."""
        return self.host_peak()[0]

    def host_line(self) -> str:
        used, phase, node = self.host_peak()
        limit = "?" if self.host_limit is None else f"{self.host_limit / GIB:g}"
        return f"host memory: {used / GIB:.1f} GiB of {limit} GiB ({phase}, {node})"

    def peak(self) -> tuple[int, str, str]:
        """``(bytes, phase, gpu)`` of the fullest GPU in its fullest phase (the first GPU among equals)."""
        best = (-1, "", "")
        for gpu in self.gpus:
            for phase in gpu.phases:
                if gpu.total(phase) > best[0]:
                    best = (gpu.total(phase), phase, gpu.slot)
        return best

    def peak_line(self) -> str:
        used, phase, slot = self.peak()
        return f"peak memory: {used / GIB:.1f} GiB of {self.gpu_bytes / GIB:g} GiB ({phase}, {slot})"

    def table(self) -> str:
        """The fullest GPU's phases part by part (GiB), then the peak line.  GPUs holding the same ranks hold the
        same bytes, so one is shown with how many are like it."""
        used, _, slot = self.peak()
        gpu = next(g for g in self.gpus if g.slot == slot)
        alike = sum(1 for g in self.gpus if g.phases == gpu.phases)
        parts = list(dict.fromkeys(p for phase in PHASES for p in gpu.phases[phase]))
        header = ["GiB"] + list(PHASES)
        rows = [header] + [[part] + [_gib(gpu.phases[phase].get(part)) for phase in PHASES] for part in parts]
        rows.append(["total"] + [_gib(gpu.total(phase)) for phase in PHASES])
        lines = _aligned(rows)
        intro = (f"{slot} (and {alike - 1} GPU(s) holding the same ranks), model shape from {self.source}"
                 if alike > 1 else f"{slot}, model shape from {self.source}")
        kv = [] if self.kv_tokens is None else [f"KV cache: {self.kv_tokens} tokens per engine"]
        return "\n".join([intro, *lines, *kv, self.peak_line(), "", *self.host_table()])

    def host_table(self) -> list[str]:
        """The fullest node's host memory per phase, part by part (GiB), then the ``host memory:`` line."""
        used, _, node = self.host_peak()
        if not used:
            return []
        phases = self.host_nodes[node]
        parts = list(dict.fromkeys(p for phase in HOST_PHASES for p in phases.get(phase, {})))
        rows = [["host GiB"] + list(HOST_PHASES)]
        rows += [[part] + [_gib(phases.get(phase, {}).get(part)) for phase in HOST_PHASES] for part in parts]
        rows.append(["total"] + [_gib(sum(phases.get(phase, {}).values())) for phase in HOST_PHASES])
        intro = f"{node} ({self.processes_per_node} worker processes; host memory per node and phase)"
        return [intro, *_aligned(rows), self.host_line()]

    def check(self) -> None:
        """Raise :class:`MemoryPlanError` naming the phase, the GPU (or node), its largest part and the setting to
        change."""
        self._check_host()
        used, phase, slot = self.peak()
        if used <= self.gpu_bytes:
            return
        gpu = next(g for g in self.gpus if g.slot == slot)
        part, size = max(gpu.phases[phase].items(), key=lambda item: item[1])
        raise MemoryPlanError(
            f"the {phase} phase needs {used / GIB:.1f} GiB on {slot}, more than executor.gpu_memory_gib="
            f"{self.gpu_bytes / GIB:g} (largest part: {part}, {size / GIB:.1f} GiB); {_remedy(part)}")


    def _check_host(self) -> None:
        used, phase, node = self.host_peak()
        if self.host_limit is None or used <= self.host_limit:
            return
        part, size = max(self.host_nodes[node][phase].items(), key=lambda item: item[1])
        raise MemoryPlanError(
            f"the {phase} phase needs {used / GIB:.1f} GiB of host memory on {node}, more than "
            f"executor.host_memory_gib={self.host_limit / GIB:g} (largest part: {part}, {size / GIB:.1f} GiB); "
            f"raise executor.host_memory_gib if the nodes have more, or spread the job over more nodes")


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            for row in rows]


def _gib(value: int | None) -> str:
    return "-" if not value else f"{value / GIB:.2f}"


def _remedy(part: str) -> str:
    role, _, what = part.partition(" ")
    if role == "engine":
        if what == "weights":
            return "raise generation.tensor_parallel_size"
        return "lower generation.gpu_memory_utilization (or set generation.kv_cache_bytes)"
    if role == "refit":
        return "lower generation.refit_bucket_bytes, or raise policy.parallel.tensor"
    if role in ("CUDA", "NCCL"):
        return "put fewer ranks on each GPU"
    if what.startswith("activations"):
        return f"lower {role}.micro_batch_tokens or set {role}.recompute (granularity='full')"
    return (f"raise {role}.parallel.tensor (shards weights and gradients) or {role}.data_parallel (shards the "
            f"optimizer state), or give the job more GPUs")


# ---------------------------------------------------------------------------------------------- model arithmetic
def shard_parameters(arch: Architecture, tensor: int, *, num_layers: int | None = None,
                     value_head: bool = False) -> int:
    """Parameters of one tensor-parallel rank (pipeline 1), as Megatron (and vLLM) split them: embedding and output
    layer over the vocabulary, attention over heads (``head_dim`` wide, which need not be hidden / heads), the MLP
    over its width; norms (and a value head) replicated."""
    h, d = arch.hidden_size, arch.head_dim
    qkv_width = (arch.num_attention_heads + 2 * arch.num_key_value_heads) * d
    layer = (h * qkv_width + arch.num_attention_heads * d * h  # linear_qkv, linear_proj
             + 3 * h * arch.ffn_hidden_size) // tensor  # linear_fc1 (gate and up), linear_fc2
    layer += (qkv_width // tensor if arch.qkv_bias else 0) + 2 * h  # qkv bias; the two norms
    layer += 2 * d if arch.qk_layernorm else 0  # Qwen3's per-head q/k norms, replicated
    layers = arch.num_layers if num_layers is None else num_layers
    embedding = arch.vocab_size * h // tensor
    if value_head:
        head = h  # a 1 × hidden weight (HF score.weight), replicated
    else:
        head = 0 if arch.tie_word_embeddings else embedding
    return embedding + layers * layer + h + head  # + final norm


def model_state_bytes(params: int, dtype: str, *, data: int, distributed: bool) -> dict[str, int]:
    """Weights, gradients and Adam state of ``params`` parameters on one rank (Megatron's DDP and optimizer as
    :class:`ppo.models.training.ModelUpdater` builds them: fp32 gradient buffers; fp32 master weights unless the
    weights are fp32; the optimizer state divided over ``data`` ranks when ``distributed``)."""
    per_param = 8 + (0 if dtype == "float32" else 4)
    optimizer = params * per_param
    return {"weights": params * DTYPE_BYTES[dtype], "gradients": params * 4,
            "optimizer": math.ceil(optimizer / data) if distributed else optimizer}


def adam_step_bytes(params: int, *, fused: bool) -> int:
    """Transient bytes of an Adam step over ``params`` parameters (after backward: the activations are freed by
    then): none for a fused Adam (Transformer Engine's or Apex's, which the GPU recipes run), an fp32 temporary per
    parameter for PyTorch's multi-tensor AdamW (its ``sqrt(v)`` denominator), which Megatron falls back on without
    either (``megatron.core.optimizer.USING_PYTORCH_OPTIMIZER``)."""
    return 0 if fused else 4 * params


def layer_activation_bytes(arch: Architecture, tokens: int, group: GroupMemory) -> int:
    """One transformer layer's saved activations for ``tokens`` tokens in 16-bit (Korthikanti et al., §4.1, for a
    SwiGLU GQA layer without dropout: norm inputs and linear inputs 8·s·h, q/k/v 2·s·(heads + 2·kv)·d, attention
    output 2·s·heads·d, MLP 6·s·f; the last three split over TP, the first over TP only with sequence parallelism;
    the local spec adds the 5·heads·s² attention scores unless recomputed).  ``heads·d`` is ``h`` unless the model
    gives ``head_dim`` explicitly (Qwen3)."""
    t, h, f = group.tensor, arch.hidden_size, arch.ffn_hidden_size
    q_width = arch.num_attention_heads * arch.head_dim
    replicated = 8 * tokens * h
    qkv_width = q_width + 2 * arch.num_key_value_heads * arch.head_dim
    split = 2 * tokens * qkv_width + 2 * tokens * q_width + 6 * tokens * f
    total = (replicated // t if group.sequence_parallel else replicated) + split // t
    if not group.flash_attention and group.recompute is None:
        total += 5 * arch.num_attention_heads * tokens * tokens // t
    return total


def activation_bytes(arch: Architecture, group: GroupMemory, *, training: bool) -> int:
    """Peak activations of one micro-batch (``micro_batch_tokens`` tokens): with autograd, every layer's saved
    activations (or, with full recompute, each chunk's input plus one chunk recomputed), the final hidden states,
    and the logprob chunk's logits (policy); without, one layer's at a time."""
    s, h = group.micro_batch_tokens, arch.hidden_size
    layers = arch.num_layers if group.num_layers is None else group.num_layers
    one_layer = layer_activation_bytes(arch, s, group)
    split = group.tensor if group.sequence_parallel else 1
    hidden = 2 * s * h  # the final hidden states, gathered to whole rows for the heads
    vocab = 0 if group.value_head else arch.vocab_size // group.tensor
    chunk = min(group.logprob_chunk_size, s)
    if not training:
        return one_layer + hidden + chunk * vocab * (2 + 4)  # logits in 16 bits, then fp32
    if group.recompute == "full":
        k = group.recompute_layers or 1
        if group.recompute_method == "block":
            kept = k * 2 * s * h // split + (layers - k) * one_layer + one_layer
        else:
            kept = math.ceil(layers / k) * 2 * s * h // split + k * one_layer
    else:
        kept = layers * one_layer
    return kept + hidden + chunk * vocab * (2 + 4 + 4)  # logits, fp32 logits, their gradient


def engine_bytes(arch: Architecture, engine: EngineMemory, gpu_bytes: int) -> dict[str, int]:
    """One engine rank's weights, profiling peak and KV cache when awake, as vLLM sizes them: the whole budget is
    ``gpu_memory_utilization × GPU`` (vLLM's rule), the KV cache what is left of it (or ``kv_cache_bytes``)."""
    weights = shard_parameters(arch, engine.tensor) * DTYPE_BYTES[engine.dtype]
    seqs = engine.max_num_seqs or VLLM_DEFAULT_MAX_SEQS
    tokens = max(VLLM_DEFAULT_BATCHED_TOKENS, engine.max_model_len)
    width = arch.ffn_hidden_size // engine.tensor
    peak = tokens * (6 * width + 4 * arch.hidden_size) + seqs * arch.vocab_size * 8  # MLP + sampler logits
    if engine.kv_cache_bytes is not None:
        kv = engine.kv_cache_bytes
    else:
        kv = int(engine.gpu_memory_utilization * gpu_bytes) - weights - peak - CUDA_CONTEXT_BYTES
    return {"weights": weights, "activations": peak, "KV cache": kv}


def kv_bytes_per_token(arch: Architecture, engine: EngineMemory) -> int:
    """KV-cache bytes of one token on one engine rank: keys and values of every layer for the rank's KV heads
    (vLLM replicates KV heads when TP exceeds their number)."""
    heads = max(1, arch.num_key_value_heads // engine.tensor)
    return 2 * arch.num_layers * heads * arch.head_dim * DTYPE_BYTES[engine.dtype]


# ---------------------------------------------------------------------------------------------- the plan
def _group_parts(arch: Architecture, group: GroupMemory) -> dict[str, int]:
    params = shard_parameters(arch, group.tensor, num_layers=group.num_layers, value_head=group.value_head)
    state = model_state_bytes(params, group.dtype, data=group.data, distributed=group.distributed_optimizer)
    parts = {f"{group.name} {k}": v for k, v in state.items()}
    if group.reference:
        parts[f"{group.name} reference"] = state["weights"]
    return parts


def plan_memory(placement, arch: Architecture, groups: list[GroupMemory], engine: EngineMemory, *,
                gpu_memory_gib: float, source: str, host_memory_gib: float | None = None,
                checkpoint_dtype: str = CHECKPOINT_DTYPE) -> MemoryPlan:
    """Bytes per GPU and phase for ``placement`` (a GPU :class:`ppo.cluster.plan.PlacementPlan`), and per node of
    host memory (checked against ``host_memory_gib`` when given); see the module docstring for what each phase holds.
    Raises :class:`MemoryPlanError` for an engine whose KV cache cannot hold one ``max_model_len`` sequence (vLLM
    would stop at start)."""
    gpu_bytes = int(gpu_memory_gib * GIB)
    by_name = {g.name: g for g in groups}
    engine_parts = engine_bytes(arch, engine, gpu_bytes)
    per_token = kv_bytes_per_token(arch, engine)
    kv_tokens = max(engine_parts["KV cache"], 0) // per_token
    if kv_tokens < engine.max_model_len:
        raise MemoryPlanError(
            f"a vLLM engine rank's KV cache would hold {kv_tokens} tokens, fewer than generation.max_model_len="
            f"{engine.max_model_len} (weights {engine_parts['weights'] / GIB:.1f} GiB of a "
            f"{engine.gpu_memory_utilization:g} × {gpu_memory_gib:g} GiB budget); raise "
            f"generation.gpu_memory_utilization or generation.tensor_parallel_size")
    routes = placement.refit_routes()
    senders = {r.sender for r in routes if r.transport == "ipc"} | {0}
    receivers = {placement.engine_slots(r.engine)[getattr(r, "worker", 0)] for r in routes
                 if r.transport == "broadcast"}
    broadcast_members = receivers | ({placement.ranks["policy"][0]} if receivers else set())
    actor_slots = [placement.engine_slots(e)[0] for e in range(placement.num_engines)] if engine.tensor > 1 else []
    rank_counts: dict = {}
    for role, slots in placement.ranks.items():
        for rank, slot in enumerate(slots):
            rank_counts.setdefault(slot, {}).setdefault(role, []).append(rank)

    gpus = []
    host: dict[int, dict[str, dict[str, int]]] = {}
    for slot in sorted(rank_counts, key=lambda s: (s.node, s.gpu)):
        roles = rank_counts[slot]
        actors = actor_slots.count(slot)
        ranks = sum(len(ranks) for ranks in roles.values())
        resident: dict[str, int] = {}
        for name in ("policy", "critic"):
            for _ in roles.get(name, ()):
                for part, size in _group_parts(arch, by_name[name]).items():
                    resident[part] = resident.get(part, 0) + size
        engines = len(roles.get("generation", ()))
        bucket = refit_bucket_bytes(arch, by_name["policy"], engine) if "policy" in by_name else 0
        base = {k: v for k, v in {
            "CUDA contexts": CUDA_CONTEXT_BYTES * (ranks + actors),
            "NCCL communicators": NCCL_COMMUNICATOR_BYTES * _communicators(roles, by_name, engine,
                                                                          slot in broadcast_members),
            "refit receiving buffer": bucket if slot in receivers else 0}.items() if v}

        def add(parts: dict[str, int], extra: dict[str, int]) -> dict[str, int]:
            out = dict(parts)
            for part, size in extra.items():
                if size:
                    out[part] = out.get(part, 0) + size
            return out

        def worst(options: list[dict[str, int]]) -> dict[str, int]:
            return max(options, key=lambda parts: sum(parts.values())) if options else {}

        groups_here = [by_name[n] for n in ("policy", "critic") if roles.get(n)]
        forward = worst([add(base | resident, {f"{g.name} activations (forward)": activation_bytes(
            arch, g, training=False)}) for g in groups_here]) or dict(base)
        training = worst([add(base | resident, {f"{g.name} activations (training)": activation_bytes(
            arch, g, training=True)}) for g in groups_here]) or dict(base)
        generation = add(base, {f"engine {k}": v * engines for k, v in engine_parts.items()})
        walk = _refit_walk(base, resident, engine_parts, engines,
                           buffers=_refit_buffers(arch, by_name, engine, roles, senders))
        refit = worst(walk[:-1])  # its last step hands the GPU to generation, that phase's column
        _add_host(host.setdefault(slot.node, {}), arch, by_name, engine, roles, actors, checkpoint_dtype)
        gpus.append(GPUMemory(f"node{slot.node}/gpu{slot.gpu}", {
            "generation": generation, "logprobs/values": forward, "training": training, "refit": refit}))
    host_nodes = {}
    for node, phases in sorted(host.items()):
        megatron = sum(len(roles.get(n, ())) for s, roles in rank_counts.items() if s.node == node
                       for n in ("policy", "critic"))
        engine_ranks = sum(len(roles.get("generation", ())) for s, roles in rank_counts.items() if s.node == node)
        add_parts(phases, "", process_parts(megatron=megatron, engine_ranks=engine_ranks,
                                            engine_actors=sum(1 for s in actor_slots if s.node == node),
                                            driver=node == 0))
        host_nodes[f"node{node}"] = {phase: phases.get(phase, {}) for phase in HOST_PHASES}
    return MemoryPlan(gpu_bytes, gpus, source, kv_tokens=kv_tokens, host_nodes=host_nodes,
                      host_limit=None if host_memory_gib is None else int(host_memory_gib * GIB),
                      processes_per_node=placement.worker_processes())


def _communicators(roles: dict, by_name: dict, engine: EngineMemory, broadcast_member: bool) -> int:
    """NCCL communicators on a GPU: each Megatron rank's tensor- and data-parallel groups (of more than one rank),
    each engine rank's tensor-parallel group, and the refit's broadcast group where this GPU takes part in it."""
    count = int(broadcast_member)
    for name in ("policy", "critic"):
        group = by_name.get(name)
        count += sum((group.tensor > 1) + (group.data > 1) for _ in roles.get(name, ()))
    return count + len(roles.get("generation", ())) * (engine.tensor > 1)


def _add_host(phases: dict, arch: Architecture, by_name: dict, engine: EngineMemory, roles: dict, actors: int,
              checkpoint_dtype: str) -> None:
    """Add the host bytes of a GPU's ranks (:mod:`ppo.workers.host_memory`) to its node's phases."""
    for name in ("policy", "critic"):
        count = len(roles.get(name, ()))
        if not count:
            continue
        group = by_name[name]
        params = shard_parameters(arch, group.tensor, num_layers=group.num_layers, value_head=group.value_head)
        state = model_state_bytes(params, group.dtype, data=group.data, distributed=group.distributed_optimizer)
        add_parts(phases, name, megatron_rank_host(
            weights=state["weights"], optimizer=state["optimizer"],
            reference=state["weights"] if group.reference else 0,
            checkpoint_shard=params * DTYPE_BYTES[checkpoint_dtype]), times=count)
    engine_ranks = len(roles.get("generation", ()))
    if engine_ranks:
        add_parts(phases, "engine", engine_rank_host(
            tensor_bytes=engine_tensor_bytes(arch, engine),
            checkpoint_shard=shard_parameters(arch, engine.tensor) * DTYPE_BYTES[checkpoint_dtype]),
            times=engine_ranks)


def engine_tensor_bytes(arch: Architecture, engine: EngineMemory) -> list[int]:
    """The bytes of each weight tensor of one engine rank as vLLM holds them (q, k and v merged, gate and up merged;
    KV heads replicated where TP exceeds them): what its level-1 sleep copies to pinned memory, tensor by tensor."""
    t, h, d, width = engine.tensor, arch.hidden_size, arch.head_dim, DTYPE_BYTES[engine.dtype]
    q = arch.num_attention_heads * d // t
    kv = max(1, arch.num_key_value_heads // t) * d
    layer = [h * (q + 2 * kv), q * h, 2 * arch.ffn_hidden_size // t * h, arch.ffn_hidden_size // t * h, h, h]
    layer += [q + 2 * kv] if arch.qkv_bias else []
    layer += [d, d] if arch.qk_layernorm else []
    embedding = arch.vocab_size // t * h
    tensors = [embedding] + layer * arch.num_layers + [h] + ([] if arch.tie_word_embeddings else [embedding])
    return [n * width for n in tensors]


def refit_bucket_bytes(arch: Architecture, policy: GroupMemory, engine: EngineMemory) -> int:
    """The largest refit bucket: ``refit_bucket_bytes``, or the largest chunk that is never split (the embedding,
    one layer, the output layer; ``ppo.workers.buckets.layer_chunks``) when that is bigger."""
    h, d = arch.hidden_size, arch.head_dim
    layer = (h * (arch.num_attention_heads + 2 * arch.num_key_value_heads) * d + arch.num_attention_heads * d * h
             + 3 * h * arch.ffn_hidden_size)
    return max(engine.refit_bucket_bytes, max(arch.vocab_size * h, layer) * DTYPE_BYTES[policy.dtype])


def _refit_buffers(arch: Architecture, by_name: dict, engine: EngineMemory, roles: dict,
                   senders: set) -> dict[str, int]:
    """The refit's transient bytes on a GPU, one bucket at a time (``PolicyWorker.stage_refit_bucket``): every
    policy rank's gathered shards of the bucket (its size), on a sending rank also their HF-named copy and the packed
    buffer.  (An engine that receives by broadcast keeps its receiving buffer in every phase: see the plan's base.)"""
    policy = by_name.get("policy")
    ranks = roles.get("policy", ())
    if policy is None:
        return {}
    bucket = refit_bucket_bytes(arch, policy, engine)
    gathered = bucket * len(ranks) if policy.tensor > 1 else 0
    sending = sum(1 for r in ranks if r in senders)
    return {"refit gathered shards": gathered, "refit HF copies and buffers": 2 * bucket * sending}


def _refit_walk(base: dict, resident: dict, engine_parts: dict, engines: int, *,
                buffers: dict[str, int]) -> list[dict[str, int]]:
    """The parts on a GPU after each of :data:`REFIT_STEPS`, starting from the training residency."""
    held = dict(resident)
    states = []
    for target, action in REFIT_STEPS:
        transient = {}
        if (target, action) == ("critic", "offload"):
            held = {k: v for k, v in held.items() if not k.startswith("critic ")}
        elif (target, action) == ("policy", "offload_state"):
            held = {k: v for k, v in held.items() if k in ("policy weights",) or not k.startswith("policy ")}
        elif (target, action) == ("engines", "wake_weights"):
            held["engine weights"] = engine_parts["weights"] * engines
        elif (target, action) == ("refit", "stream"):
            transient = buffers
        elif (target, action) == ("policy", "offload"):
            held.pop("policy weights", None)
        elif (target, action) == ("engines", "wake_kv_cache"):
            held["engine KV cache"] = engine_parts["KV cache"] * engines
            held["engine activations"] = engine_parts["activations"] * engines
        states.append({**base, **held, **{k: v for k, v in transient.items() if v}})
    return states
