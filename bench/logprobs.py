"""Peak memory of next-token logprobs: chunked vocab-parallel cross-entropy against a naive full log_softmax.

    .venv/bin/python bench/logprobs.py                       # B=4, T=2048, V=32768, chunk 256
    .venv/bin/python bench/logprobs.py --length 4096 --chunk 512

Each measurement runs in a fresh child process on the same model and batch: it records the resident set size just
before the computation and the process's peak RSS after it; the difference is the computation's peak extra memory.
The naive baseline materialises ``log_softmax(logits)`` as ``[B, T, V]`` float32; ``token_logprobs`` keeps one
chunk of logits at a time (and, with gradients, recomputes chunks in backward).  Also prints the largest
difference between the two results.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys

import torch


def child(args) -> None:
    import psutil

    from ppo.models.architecture import Architecture
    from ppo.models.builder import build_gpt_model
    from ppo.models.distributed import initialize
    from ppo.models.forward import full_logits, hidden_states, token_logprobs
    from ppo.models.parallel import ParallelConfig

    initialize(ParallelConfig(), seed=0)
    arch = Architecture(
        model_type="qwen2", vocab_size=args.vocab, hidden_size=128, num_layers=2, num_attention_heads=4,
        num_key_value_heads=2, ffn_hidden_size=256, rms_norm_eps=1e-6, rope_theta=10000.0,
        max_position_embeddings=args.length, tie_word_embeddings=True, qkv_bias=True,
    )
    model = build_gpt_model(arch)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, args.vocab, (args.batch, args.length), generator=g)
    segments = torch.ones_like(ids)
    with torch.no_grad():  # warm up the code paths and allocator with a short sequence
        token_logprobs(model, ids[:, :64], segments[:, :64], chunk_size=args.chunk)
        hidden_states(model, ids, segments)

    def naive():
        logits = full_logits(model, ids, segments).float()
        return torch.log_softmax(logits, dim=-1)[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)

    def chunked():
        return token_logprobs(model, ids, segments, chunk_size=args.chunk)[:, 1:]

    before = psutil.Process().memory_info().rss
    context = torch.enable_grad() if args.backward else torch.no_grad()
    with context:
        result = {"naive": naive, "chunked": chunked}[args.mode]()
        if args.backward:
            result.sum().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    torch.save(result.detach(), args.out)
    print(json.dumps({"peak_extra_bytes": peak - before}))


def run(args, mode: str, backward: bool, out: str) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, __file__, "--child", "--mode", mode, "--out", out, "--batch", str(args.batch),
           "--length", str(args.length), "--vocab", str(args.vocab), "--chunk", str(args.chunk)]
    if backward:
        cmd.append("--backward")
    env = dict(os.environ, MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"bench child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_extra_bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=["naive", "chunked"])
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        return child(args)

    import tempfile

    mib = 2**20
    print(f"logprobs B={args.batch} T={args.length} V={args.vocab} chunk={args.chunk} (float32, CPU)")
    with tempfile.TemporaryDirectory() as tmp:
        for backward in (False, True):
            peaks = {m: run(args, m, backward, f"{tmp}/{m}.pt") for m in ("naive", "chunked")}
            diff = (torch.load(f"{tmp}/naive.pt") - torch.load(f"{tmp}/chunked.pt")).abs().max().item()
            label = "forward+backward" if backward else "forward only    "
            print(f"  {label}: naive {peaks['naive'] / mib:8.1f} MiB, chunked {peaks['chunked'] / mib:8.1f} MiB, "
                  f"ratio {peaks['naive'] / max(peaks['chunked'], 1):5.1f}x, max |diff| {diff:.1e}")


if __name__ == "__main__":
    main()
