"""Which Megatron-Core layer implementation a model is built from: ``"local"`` or ``"transformer_engine"``.

- ``"local"`` (the default): Megatron's local layer spec, plain torch.  Runs anywhere, CPU included, and is what
  every CPU test exercises.  Its attention materialises a dense ``T × T`` mask and scores.  Its norms are
  :class:`ppo.models.norms.SequenceParallelRMSNorm` (Megatron's own torch norm refuses sequence parallelism), so
  it runs sequence parallelism too: ``tests/models/test_sequence_parallel.py`` checks TP 2 with it against TP 1.
- ``"transformer_engine"``: Megatron's Transformer Engine spec (fused/flash attention, norms fused into the
  following linear layers, sequence parallelism).  GPUs only; the GPU install profile installs Transformer Engine,
  and the GPU recipes use it.

Context parallelism is refused for both (``ppo.models.parallel``): the workers do not split sequences across
context-parallel ranks.  :func:`check` runs before launch and needs nothing installed; :func:`decoder_spec` runs in
the worker and fails there, in one line, when Transformer Engine is missing.
"""

from __future__ import annotations

LOCAL = "local"
TRANSFORMER_ENGINE = "transformer_engine"
IMPLEMENTATIONS = (LOCAL, TRANSFORMER_ENGINE)


class LayerImplementationError(ValueError):
    pass


def check(impl: str) -> None:
    """Raise ``LayerImplementationError`` (one line naming the setting) for an unknown ``impl``; both implementations
    run every layout, sequence parallelism included."""
    if impl not in IMPLEMENTATIONS:
        raise LayerImplementationError(f"transformer_impl must be 'local' or 'transformer_engine', got {impl!r}")


def require_transformer_engine() -> None:
    """One clear line, at worker start, instead of an import error deep inside Megatron."""
    try:
        import transformer_engine  # noqa: F401
    except ImportError as err:
        raise LayerImplementationError(
            f"transformer_impl='transformer_engine' but Transformer Engine is not importable here ({err}): install "
            f"the GPU profile (README), or set transformer_impl='local'"
        ) from None


def layer_spec(impl: str, *, qk_layernorm: bool = False):
    """Megatron's ``ModuleSpec`` for one decoder layer: RMSNorm, SwiGLU; with ``qk_layernorm`` a per-head norm on
    queries and keys (Qwen3's ``q_norm``/``k_norm``).  Transformer Engine's spec as Megatron gives it (its ``TENorm``
    follows ``config.normalization`` and marks its weights for sequence parallelism itself); the local spec with
    :class:`~ppo.models.norms.SequenceParallelRMSNorm` in every norm."""
    from megatron.core.models.gpt import gpt_layer_specs

    if impl == TRANSFORMER_ENGINE:
        require_transformer_engine()
        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(qk_layernorm=qk_layernorm)
    from ppo.models.norms import SequenceParallelRMSNorm

    layer = gpt_layer_specs.get_gpt_layer_local_spec(normalization="RMSNorm", qk_layernorm=qk_layernorm)
    layer.submodules.input_layernorm = SequenceParallelRMSNorm
    layer.submodules.pre_mlp_layernorm = SequenceParallelRMSNorm
    if qk_layernorm:
        attention = layer.submodules.self_attention.submodules
        attention.q_layernorm = attention.k_layernorm = SequenceParallelRMSNorm
    return layer


def decoder_spec(impl: str, config, *, qk_layernorm: bool = False):
    """What ``GPTModel`` takes as ``transformer_layer_spec`` for this rank's pipeline stage: :func:`layer_spec`, and
    for the local spec the whole block spelled out, because Megatron picks the final norm from what is installed
    (Transformer Engine, Apex, else its torch norm that refuses sequence parallelism), not from the layer spec."""
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules, get_num_layers_to_build

    layer = layer_spec(impl, qk_layernorm=qk_layernorm)
    if impl == TRANSFORMER_ENGINE:
        return layer
    from ppo.models.norms import SequenceParallelRMSNorm

    return TransformerBlockSubmodules(layer_specs=[layer] * get_num_layers_to_build(config),
                                      layer_norm=SequenceParallelRMSNorm)
