"""Build a Megatron-Core ``GPTModel`` for an ``Architecture``: the local layer spec (any machine) or Transformer
Engine's (GPUs), see :mod:`ppo.models.layers`."""

from __future__ import annotations

import torch

from ppo.models import layers
from ppo.models.architecture import Architecture
from ppo.models.cpu_compat import apply_if_needed
from ppo.models.recompute import Recompute


def torch_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"``, ``"bfloat16"`` or ``"float16"`` (a spec's ``dtype``) as a torch dtype; a torch dtype as is."""
    if isinstance(dtype, torch.dtype):
        return dtype
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]


def default_device() -> torch.device:
    """The current CUDA device (the one Ray made visible to this process), else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def transformer_config(arch: Architecture, *, dtype: torch.dtype = torch.float32, recompute: Recompute = Recompute(),
                       sequence_parallel: bool = False, **overrides):
    """Megatron's ``TransformerConfig``: the architecture, this rank's parallel layout, dtype and recomputation."""
    from megatron.core import parallel_state
    from megatron.core.transformer.transformer_config import TransformerConfig

    recompute.check(arch.num_layers // parallel_state.get_pipeline_model_parallel_world_size())
    return TransformerConfig(
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        num_attention_heads=arch.num_attention_heads,
        num_query_groups=arch.num_key_value_heads,
        kv_channels=arch.head_dim,
        ffn_hidden_size=arch.ffn_hidden_size,
        normalization="RMSNorm",
        layernorm_epsilon=arch.rms_norm_eps,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=arch.qkv_bias,
        qk_layernorm=arch.qk_layernorm,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tensor_model_parallel_size=parallel_state.get_tensor_model_parallel_world_size(),
        pipeline_model_parallel_size=parallel_state.get_pipeline_model_parallel_world_size(),
        context_parallel_size=parallel_state.get_context_parallel_world_size(),
        sequence_parallel=sequence_parallel,
        params_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        use_cpu_initialization=not torch.cuda.is_available(),
        # losses in ppo.algorithms are already divided by global token/sequence counts, so data-parallel
        # gradients must be summed, not averaged
        calculate_per_token_loss=True,
        **recompute.transformer_config(),
        **overrides,
    )


def rope_scaling_arguments(arch: Architecture) -> dict:
    """``GPTModel``'s llama3 RoPE scaling for ``arch`` (none when it has none); ``Architecture.from_hf_config`` has
    refused parameters other than Megatron's fixed ones."""
    if arch.rope_scaling_factor is None:
        return {}
    return {"rope_scaling": True, "rope_scaling_factor": arch.rope_scaling_factor}


def head_after_sequence_gather(output_layer) -> None:
    """Under sequence parallelism, make the vocabulary-parallel output layer take the whole sequence that
    ``ppo.models.forward.hidden_states`` gathered, and leave its input gradient to that gather.

    The layer was built to gather the sequence itself (``sequence_parallel``), which the chunked logprobs cannot use:
    they cut the whole sequence.  With ``sequence_parallel`` off alone, the layer (built with ``allreduce_dgrad``
    off) would pass its input through ``copy_to_tensor_model_parallel_region``, whose backward all-reduces the
    input gradient over the TP ranks; the gather's backward reduce-scatters it again, and every gradient below the
    head came out TP times too large.  ``disable_grad_reduce`` (Megatron's switch for a reduction done elsewhere)
    leaves the one reduction, the gather's reduce-scatter, which sums the vocabulary shards' parts.
    """
    output_layer.sequence_parallel = False
    output_layer.disable_grad_reduce = True


def build_gpt_model(arch: Architecture, *, dtype: str | torch.dtype = torch.float32, device: torch.device | None = None,
                    transformer_impl: str = layers.LOCAL, **config_overrides):
    """A ``GPTModel`` for this rank's tensor/pipeline shard (model parallel state must be initialised), on
    ``device`` (default: :func:`default_device`; a worker passes its own).

    Logits stay split over the vocabulary across TP ranks (``parallel_output=True``): logprobs use the
    vocab-parallel cross-entropy, and ``ppo.models.forward.full_logits`` gathers them when needed.
    ``config_overrides`` (``recompute=``, ``sequence_parallel=``, any ``TransformerConfig`` field) go to
    :func:`transformer_config`.
    """
    apply_if_needed()
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel

    dtype = torch_dtype(dtype)
    layers.check(transformer_impl)
    config = transformer_config(arch, dtype=dtype, **config_overrides)
    # before Megatron's modules: a missing Transformer Engine, one line
    spec = layers.decoder_spec(transformer_impl, config, qk_layernorm=arch.qk_layernorm)
    model = GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=arch.vocab_size,
        max_sequence_length=arch.max_position_embeddings,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        parallel_output=True,
        share_embeddings_and_output_weights=arch.tie_word_embeddings,
        position_embedding_type="rope",
        rotary_percent=1.0,
        rotary_base=int(arch.rope_theta),
        **rope_scaling_arguments(arch),
    )
    model.transformer_impl = transformer_impl  # ppo.models.forward builds masks for the local spec only
    if config.sequence_parallel and model.post_process:
        head_after_sequence_gather(model.output_layer)
    if dtype != torch.float32:
        model = model.to(dtype)
    return model.to(device or default_device())
