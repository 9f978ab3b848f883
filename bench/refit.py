"""Weight refit throughput: seconds per GB to push a full HF state dict into a running vLLM engine, in memory.

    .venv/bin/python bench/refit.py                      # ~100 MB float32 model, 5 refits
    .venv/bin/python bench/refit.py --hidden 1024 --layers 12

Baseline in the same run: the same refit through the filesystem (write a safetensors file, read it back, load it into
the engine), as frameworks that refit from checkpoints on disk do, so the ratio says what the in-memory path saves.
The file sits on local disk in a warm page cache, so the baseline is optimistic for shared filesystems.  The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    from ppo.data import build_gsm8k_tokenizer
    from ppo.data.gsm8k import SHARED_GSM8K_DIR
    from ppo.models.tiny import create_tiny_model
    from ppo.rollout.engine import VLLMGeneration

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = build_gsm8k_tokenizer(f"{SHARED_GSM8K_DIR}/train.jsonl")
        path = create_tiny_model(f"{tmp}/model", tokenizer, hidden_size=args.hidden, num_layers=args.layers,
                                 num_attention_heads=args.hidden // 64, num_key_value_heads=args.hidden // 128,
                                 intermediate_size=args.hidden * 3, tie_word_embeddings=False)
        engine = VLLMGeneration(model_path=str(path), dtype="float32", max_model_len=128,
                                kv_cache_bytes=32 << 20).build()
        state = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).state_dict()
        gigabytes = sum(t.numel() * t.element_size() for t in state.values()) / 1e9

        refit = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            engine.refit(state.items())
            refit.append(time.perf_counter() - start)
        disk = []
        file = f"{tmp}/refit.safetensors"
        for _ in range(args.repeats):
            start = time.perf_counter()
            save_file({name: tensor.contiguous() for name, tensor in state.items()}, file)
            engine.refit(load_file(file).items())
            disk.append(time.perf_counter() - start)

    t_refit, t_disk = statistics.median(refit), statistics.median(disk)
    print(f"refit of {gigabytes * 1e3:.0f} MB ({args.layers} layers, hidden {args.hidden}, float32), CPU")
    print(f"  in-memory refit into vLLM   : {t_refit:7.3f} s  = {t_refit / gigabytes:6.2f} s/GB")
    print(f"  baseline: through a file    : {t_disk:7.3f} s  = {t_disk / gigabytes:6.2f} s/GB")
    print(f"  ratio (disk / in-memory)    : {t_disk / t_refit:7.1f}x")


if __name__ == "__main__":
    main()
