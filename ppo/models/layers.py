"""Which Megatron-Core layer implementation a model is built from: ``"local"`` or ``"transformer_engine"``.

- ``"local"`` (the default): Megatron's local layer spec, plain torch.  Runs anywhere, CPU included, and is what
  every CPU test exercises.  Its attention materialises a dense ``T × T`` mask and scores, and its norms cannot run
  on sequence shards, so it cannot do sequence parallelism.
- ``"transformer_engine"``: Megatron's Transformer Engine spec (fused/flash attention, norms fused into the
  following linear layers, sequence parallelism).  GPUs only; the GPU install profile installs Transformer Engine.

Context parallelism is refused for both (``ppo.models.parallel``): the workers do not split sequences across
context-parallel ranks.  :func:`check` runs before launch and needs nothing installed; :func:`layer_spec` runs in
the worker and fails there, in one line, when Transformer Engine is missing.
"""

from __future__ import annotations

LOCAL = "local"
TRANSFORMER_ENGINE = "transformer_engine"
IMPLEMENTATIONS = (LOCAL, TRANSFORMER_ENGINE)


class LayerImplementationError(ValueError):
    pass


def check(impl: str, *, sequence_parallel: bool) -> None:
    """Raise ``LayerImplementationError`` (one line naming the setting) when ``impl`` cannot run the layout."""
    if impl not in IMPLEMENTATIONS:
        raise LayerImplementationError(f"transformer_impl must be 'local' or 'transformer_engine', got {impl!r}")
    if sequence_parallel and impl != TRANSFORMER_ENGINE:
        raise LayerImplementationError(
            "parallel.sequence_parallel=True needs transformer_impl='transformer_engine': the local layer spec's "
            "norms cannot run on sequence shards"
        )


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
    """Megatron's ``ModuleSpec`` for one decoder layer (RMSNorm, SwiGLU; with ``qk_layernorm`` a per-head norm on
    queries and keys, Qwen3's ``q_norm``/``k_norm``: RMSNorm in the local spec, Transformer Engine's ``TENorm``, which
    follows ``config.normalization``, in the other)."""
    from megatron.core.models.gpt import gpt_layer_specs

    if impl == TRANSFORMER_ENGINE:
        require_transformer_engine()
        return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(qk_layernorm=qk_layernorm)
    return gpt_layer_specs.get_gpt_layer_local_spec(normalization="RMSNorm", qk_layernorm=qk_layernorm)
