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
and gathers them back into full HF tensors.  Both are pure functions of state dicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ppo.models.architecture import Architecture

VALUE_HEAD = "output_layer.weight"
HF_VALUE_HEAD = "score.weight"


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


def _qkv_to_megatron(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, arch: Architecture) -> torch.Tensor:
    groups, head_dim = arch.num_key_value_heads, arch.head_dim
    heads_per_group = arch.num_attention_heads // groups
    rest = q.shape[1:]
    q = q.reshape(groups, heads_per_group * head_dim, *rest)
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


def hf_to_megatron(
    hf: dict[str, torch.Tensor],
    arch: Architecture,
    *,
    tp_rank: int = 0,
    tp_size: int = 1,
    layers: Iterable[int] | None = None,
    pre_process: bool = True,
    post_process: bool = True,
    value_head: bool = False,
) -> dict[str, torch.Tensor]:
    """This rank's Megatron state dict from a full HF state dict.

    ``layers`` are the global indices of this pipeline stage's layers (default: all).  With ``value_head`` the
    output layer is the critic's ``Linear(hidden, 1)``, taken from HF ``score.weight`` when present.
    """
    _check_tp(arch, tp_size)
    shard = lambda t, dim=0: t.chunk(tp_size, dim=dim)[tp_rank].contiguous()  # noqa: E731
    out: dict[str, torch.Tensor] = {}
    if pre_process:
        out["embedding.word_embeddings.weight"] = shard(hf["model.embed_tokens.weight"])
    for j, i in enumerate(range(arch.num_layers) if layers is None else layers):
        attn, mlp, mg = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.", f"decoder.layers.{j}."
        for hf_name, mg_name in _layer_pairs(i, j, arch):
            out[mg_name] = hf[hf_name]
        qkv = _qkv_to_megatron(hf[attn + "q_proj.weight"], hf[attn + "k_proj.weight"], hf[attn + "v_proj.weight"], arch)
        out[mg + "self_attention.linear_qkv.weight"] = shard(qkv)
        if arch.qkv_bias:
            bias = _qkv_to_megatron(hf[attn + "q_proj.bias"], hf[attn + "k_proj.bias"], hf[attn + "v_proj.bias"], arch)
            out[mg + "self_attention.linear_qkv.bias"] = shard(bias)
        out[mg + "self_attention.linear_proj.weight"] = shard(hf[attn + "o_proj.weight"], dim=1)
        out[mg + "mlp.linear_fc1.weight"] = torch.cat(
            [shard(hf[mlp + "gate_proj.weight"]), shard(hf[mlp + "up_proj.weight"])], dim=0
        )
        out[mg + "mlp.linear_fc2.weight"] = shard(hf[mlp + "down_proj.weight"], dim=1)
    if post_process:
        out["decoder.final_layernorm.weight"] = hf["model.norm.weight"]
        if value_head:
            if HF_VALUE_HEAD in hf:
                out[VALUE_HEAD] = hf[HF_VALUE_HEAD]
        elif not arch.tie_word_embeddings:
            out["output_layer.weight"] = shard(hf["lm_head.weight"])
        elif not pre_process:
            out["output_layer.weight"] = shard(hf["model.embed_tokens.weight"])
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
    """All tensors of an HF checkpoint directory (``model.safetensors`` or a sharded index)."""
    path = Path(path)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (path / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"no model.safetensors (or index) in {path}")
    state: dict[str, torch.Tensor] = {}
    for name in files:
        state.update(load_file(str(path / name)))
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
