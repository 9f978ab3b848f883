"""Weight conversion between Hugging Face checkpoints (Qwen2 / Qwen3 / Llama) and Megatron-Core's local-spec GPTModel.

Layout facts (megatron-core 0.16.1, local layer spec):

- ``linear_qkv`` holds, for each query group in turn, ``[q of the group's heads; k; v]`` (weight and bias).  Groups
  are contiguous, so a tensor-parallel split along dim 0 gives each rank whole groups (needs groups % TP == 0).
- ``linear_fc1`` is ``[gate; up]`` **per TP rank**: rank r holds ``[gate_r; up_r]``, not a slice of the full
  ``[gate; up]``.
- ``linear_proj`` and ``linear_fc2`` split along dim 1; the embedding and the output layer along the vocabulary.
- Norms: ``input_layernorm``, ``pre_mlp_layernorm`` (HF ``post_attention_layernorm``), ``decoder.final_layernorm``;
  Qwen3's per-head ``q_norm``/``k_norm`` are ``self_attention.q_layernorm``/``k_layernorm`` (``head_dim`` wide, the
  same on every TP rank).  Heads are ``arch.head_dim`` wide, which Qwen3 need not make ``hidden / heads``.
  Transformer Engine's layer spec fuses the two layer norms into the next linear layer
  (``self_attention.linear_qkv.layer_norm_weight``, ``mlp.linear_fc1.layer_norm_weight``): the conversions speak the
  local names, and :func:`load_megatron_state` / :func:`megatron_to_hf` rename at the model's edge.

``hf_to_megatron`` produces one rank's shard; ``megatron_to_hf`` takes the shards of every TP rank (in rank order)
and gathers them back into full HF tensors.  ``hf_to_megatron`` reads through a :class:`WeightSource`: a whole state
dict in memory, or the checkpoint's safetensors files (:class:`SafetensorsFiles`), of which a rank then reads only
its own rows and columns of its own layers (at start-up each rank holds its shard, not the model).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ppo.models import folder_check
from ppo.models.architecture import Architecture

VALUE_HEAD = "output_layer.weight"
HF_VALUE_HEAD = "score.weight"


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _part(size: int, part: int, parts: int) -> slice:
    """Part ``part`` of ``parts`` of ``range(size)``, split as ``torch.chunk`` splits it."""
    step = -(-size // parts)
    return slice(min(part * step, size), min((part + 1) * step, size))


class WeightSource(Protocol):
    """Where :func:`hf_to_megatron` reads HF tensors: ``read`` gives a whole tensor, or part ``part`` of ``parts``
    along ``dim`` (``torch.chunk``'s split).  ``bytes_loaded``: the host bytes the source has brought into memory."""

    bytes_loaded: int

    def __contains__(self, name: str) -> bool: ...

    def read(self, name: str, *, dim: int = 0, part: int = 0, parts: int = 1) -> torch.Tensor: ...


class StateDict:
    """HF tensors already in memory (a whole state dict): it holds every tensor whatever a rank reads of it."""

    def __init__(self, state: dict[str, torch.Tensor]):
        self.state = state
        self.bytes_loaded = sum(_nbytes(t) for t in state.values())

    def __contains__(self, name: str) -> bool:
        return name in self.state

    def read(self, name: str, *, dim: int = 0, part: int = 0, parts: int = 1) -> torch.Tensor:
        tensor = self.state[name]
        return tensor if parts == 1 else tensor.chunk(parts, dim=dim)[part].contiguous()


class SafetensorsFiles:
    """The safetensors of an HF checkpoint (a folder with ``model.safetensors`` or a sharded index, or one
    ``.safetensors`` file), read lazily: ``read`` brings only the asked part of a tensor into memory, so a rank
    that converts its shard holds its shard, never the whole model."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.files: dict[str, Path] = {}
        for file in weight_files(path):
            with safe_open(str(file), framework="pt") as handle:
                self.files.update(dict.fromkeys(handle.keys(), file))
        self._handles: dict[Path, object] = {}
        self.bytes_loaded = 0

    def __contains__(self, name: str) -> bool:
        return name in self.files

    def read(self, name: str, *, dim: int = 0, part: int = 0, parts: int = 1) -> torch.Tensor:
        file = self.files[name]
        if file not in self._handles:
            self._handles[file] = safe_open(str(file), framework="pt")
        piece = self._handles[file].get_slice(name)
        index = (slice(None),) * dim + (_part(piece.get_shape()[dim], part, parts),)
        tensor = piece[index]
        self.bytes_loaded += _nbytes(tensor)
        return tensor


def weight_files(path: str | Path) -> list[Path]:
    """The safetensors files of an HF checkpoint folder (``model.safetensors``, or those its index names), or
    ``[path]`` for one ``.safetensors`` file."""
    path = Path(path)
    return [path] if path.is_file() else folder_check.weight_files(path)


def _layer_pairs(i: int, j: int, arch: Architecture) -> list[tuple[str, str]]:
    """(HF name, Megatron name) of the tensors that are copied without reshuffling (and replicated over TP), for HF
    layer i / local layer j."""
    hf, mg = f"model.layers.{i}.", f"decoder.layers.{j}."
    pairs = [
        (hf + "input_layernorm.weight", mg + "input_layernorm.weight"),
        (hf + "post_attention_layernorm.weight", mg + "pre_mlp_layernorm.weight"),
    ]
    if arch.qk_layernorm:
        pairs += [
            (hf + "self_attn.q_norm.weight", mg + "self_attention.q_layernorm.weight"),
            (hf + "self_attn.k_norm.weight", mg + "self_attention.k_layernorm.weight"),
        ]
    return pairs


TE_FUSED_NORMS = {
    "input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
    "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
}
"""Local-spec name → Transformer Engine spec name of each decoder layer's norms (the rest is named alike)."""


def rename_layer_norms(state: dict, *, to_transformer_engine: bool) -> dict:
    """``state`` with the per-layer norm names of the other layer spec (other names unchanged)."""
    pairs = TE_FUSED_NORMS.items() if to_transformer_engine else [(te, local) for local, te in TE_FUSED_NORMS.items()]
    out = {}
    for name, value in state.items():
        for old, new in pairs:
            if name.startswith("decoder.layers.") and name.endswith("." + old):
                name = name[: -len(old)] + new
                break
        out[name] = value
    return out


def _check_tp(arch: Architecture, tp_size: int) -> None:
    for name, value in [
        ("num_key_value_heads", arch.num_key_value_heads),
        ("num_attention_heads", arch.num_attention_heads),
        ("intermediate_size", arch.ffn_hidden_size),
        ("vocab_size", arch.vocab_size),
    ]:
        if value % tp_size:
            raise ValueError(f"tensor parallel size {tp_size} does not divide {name}={value}")


def _qkv_to_megatron(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``[q of group g; k_g; v_g]`` for each query group in ``k`` in turn: whole tensors, or one TP rank's rows of
    each (its groups are contiguous in q, k and v alike)."""
    groups = k.shape[0] // head_dim
    rest = q.shape[1:]
    q = q.reshape(groups, -1, *rest)
    k = k.reshape(groups, head_dim, *rest)
    v = v.reshape(groups, head_dim, *rest)
    return torch.cat([q, k, v], dim=1).reshape(-1, *rest)


def _qkv_to_hf(qkv: torch.Tensor, arch: Architecture) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    groups, head_dim = arch.num_key_value_heads, arch.head_dim
    heads_per_group = arch.num_attention_heads // groups
    rest = qkv.shape[1:]
    grouped = qkv.reshape(groups, (heads_per_group + 2) * head_dim, *rest)
    q, k, v = grouped.split([heads_per_group * head_dim, head_dim, head_dim], dim=1)
    return q.reshape(-1, *rest), k.reshape(-1, *rest), v.reshape(-1, *rest)


def pipeline_stage(num_layers: int, stage: int, stages: int) -> dict:
    """What pipeline stage ``stage`` of ``stages`` owns, as :func:`hf_to_megatron`'s keyword arguments: its
    contiguous ``layers`` (Megatron's even split), and whether it holds the embedding and the head."""
    per_stage = num_layers // stages
    return {"layers": range(stage * per_stage, (stage + 1) * per_stage), "pre_process": stage == 0,
            "post_process": stage == stages - 1}


def hf_to_megatron(
    hf: dict[str, torch.Tensor] | WeightSource,
    arch: Architecture,
    *,
    tp_rank: int = 0,
    tp_size: int = 1,
    layers: Iterable[int] | None = None,
    pre_process: bool = True,
    post_process: bool = True,
    value_head: bool = False,
) -> dict[str, torch.Tensor]:
    """This rank's Megatron state dict from HF tensors: a full HF state dict, or a :class:`WeightSource` of which
    only this rank's parts are read (a TP rank's rows or columns of each sharded tensor, its stage's layers).

    ``layers`` are the global indices of this pipeline stage's layers (default: all).  With ``value_head`` the
    output layer is the critic's ``Linear(hidden, 1)``, taken from HF ``score.weight`` when present.
    """
    _check_tp(arch, tp_size)
    source = StateDict(hf) if isinstance(hf, dict) else hf
    read = source.read
    mine = {"part": tp_rank, "parts": tp_size}
    out: dict[str, torch.Tensor] = {}
    if pre_process:
        out["embedding.word_embeddings.weight"] = read("model.embed_tokens.weight", **mine)
    for j, i in enumerate(range(arch.num_layers) if layers is None else layers):
        attn, mlp, mg = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.", f"decoder.layers.{j}."
        for hf_name, mg_name in _layer_pairs(i, j, arch):
            out[mg_name] = read(hf_name)
        for kind in ("weight", "bias") if arch.qkv_bias else ("weight",):
            q, k, v = (read(f"{attn}{x}_proj.{kind}", **mine) for x in "qkv")
            out[f"{mg}self_attention.linear_qkv.{kind}"] = _qkv_to_megatron(q, k, v, arch.head_dim)
        out[mg + "self_attention.linear_proj.weight"] = read(attn + "o_proj.weight", dim=1, **mine)
        out[mg + "mlp.linear_fc1.weight"] = torch.cat(
            [read(mlp + "gate_proj.weight", **mine), read(mlp + "up_proj.weight", **mine)], dim=0
        )
        out[mg + "mlp.linear_fc2.weight"] = read(mlp + "down_proj.weight", dim=1, **mine)
    if post_process:
        out["decoder.final_layernorm.weight"] = read("model.norm.weight")
        if value_head:
            if HF_VALUE_HEAD in source:
                out[VALUE_HEAD] = read(HF_VALUE_HEAD)
        elif not arch.tie_word_embeddings:
            out["output_layer.weight"] = read("lm_head.weight", **mine)
        elif not pre_process:
            out["output_layer.weight"] = read("model.embed_tokens.weight", **mine)
    return out


def megatron_to_hf(
    shards: list[dict[str, torch.Tensor]],
    arch: Architecture,
    *,
    layer_offset: int = 0,
    value_head: bool = False,
) -> dict[str, torch.Tensor]:
    """Full HF tensors from the Megatron state dicts of every TP rank of one pipeline stage (in rank order); either
    layer spec's names."""
    shards = [rename_layer_norms(s, to_transformer_engine=False) for s in shards]
    first = shards[0]
    cat = lambda name, dim=0: torch.cat([s[name] for s in shards], dim=dim)  # noqa: E731
    out: dict[str, torch.Tensor] = {}
    if "embedding.word_embeddings.weight" in first:
        out["model.embed_tokens.weight"] = cat("embedding.word_embeddings.weight")
    local_layers = sorted({int(k.split(".")[2]) for k in first if k.startswith("decoder.layers.")})
    for j in local_layers:
        i = j + layer_offset
        attn, mlp, mg = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.", f"decoder.layers.{j}."
        for hf_name, mg_name in _layer_pairs(i, j, arch):
            out[hf_name] = first[mg_name]
        q, k, v = _qkv_to_hf(cat(mg + "self_attention.linear_qkv.weight"), arch)
        out.update({attn + "q_proj.weight": q, attn + "k_proj.weight": k, attn + "v_proj.weight": v})
        if mg + "self_attention.linear_qkv.bias" in first:
            q, k, v = _qkv_to_hf(cat(mg + "self_attention.linear_qkv.bias"), arch)
            out.update({attn + "q_proj.bias": q, attn + "k_proj.bias": k, attn + "v_proj.bias": v})
        out[attn + "o_proj.weight"] = cat(mg + "self_attention.linear_proj.weight", dim=1)
        gates, ups = zip(*(s[mg + "mlp.linear_fc1.weight"].chunk(2, dim=0) for s in shards))
        out[mlp + "gate_proj.weight"] = torch.cat(gates, dim=0)
        out[mlp + "up_proj.weight"] = torch.cat(ups, dim=0)
        out[mlp + "down_proj.weight"] = cat(mg + "mlp.linear_fc2.weight", dim=1)
    if "decoder.final_layernorm.weight" in first:
        out["model.norm.weight"] = first["decoder.final_layernorm.weight"]
        if value_head:
            out[HF_VALUE_HEAD] = first[VALUE_HEAD]
        elif not arch.tie_word_embeddings:
            out["lm_head.weight"] = cat("output_layer.weight")
    return out


def load_hf_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of an HF checkpoint directory (``model.safetensors`` or a sharded index), in memory at once: for
    tools and tests; a worker reads its shard through :class:`SafetensorsFiles`."""
    state: dict[str, torch.Tensor] = {}
    for file in weight_files(path):
        state.update(load_file(str(file)))
    return state


def save_hf_checkpoint(state: dict[str, torch.Tensor], config: dict, path: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` so that ``transformers`` and vLLM load the directory."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    return path


def load_megatron_state(
    model: torch.nn.Module, state: dict[str, torch.Tensor], *, optional: tuple[str, ...] = ()
) -> None:
    """Copy ``state`` into ``model``; every parameter must be covered except ``_extra_state`` and ``optional`` names
    (e.g. a critic's value head when the HF checkpoint has no ``score.weight``: it keeps its random init).
    ``state`` has local-spec names; a Transformer Engine model gets them renamed."""
    if any(name.endswith(TE_FUSED_NORMS["input_layernorm.weight"]) for name in model.state_dict()):
        state = rename_layer_norms(state, to_transformer_engine=True)
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("_extra_state") and k not in optional]
    if missing or result.unexpected_keys:
        raise KeyError(f"weight conversion mismatch: missing {missing}, unexpected {result.unexpected_keys}")
