"""Fast GAE against the per-time-step loop the reference frameworks use, measured in the same run.

    .venv/bin/python bench/gae.py                 # B=256, T=4096 (the issue's size)
    .venv/bin/python bench/gae.py --batch 64 --length 8192 --repeats 5

Prints the median wall time of each, the speed-up ratio and the relative error of the fast path (float32)
against the loop (float32, and float64).  Both run on the same inputs, threads and machine; the numba kernel is
compiled (or loaded from its cache) before timing.
"""

from __future__ import annotations

import argparse

import torch

from ppo.algorithms.gae import compute_gae, compute_gae_loop

from timing import median_seconds  # bench/timing.py (bench/ is this script's first sys.path entry)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    shape = (args.batch, args.length)
    rewards = torch.randn(shape, generator=g).to(args.device)
    values = torch.randn(shape, generator=g).to(args.device)
    mask = (torch.rand(shape, generator=g) > 0.1).float().to(args.device)
    kwargs = dict(gamma=1.0, lam=0.95)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    fast = lambda: (compute_gae(rewards, values, mask, **kwargs), sync())  # noqa: E731
    loop = lambda: (compute_gae_loop(rewards, values, mask, **kwargs), sync())  # noqa: E731
    t_fast = median_seconds(fast, args.repeats)
    t_loop = median_seconds(loop, max(3, args.repeats // 2))

    def rel_err(ours, reference):
        return max(((a.double() - b.double()).abs().max() / b.double().abs().max()).item()
                   for a, b in zip(ours, reference))

    ours = compute_gae(rewards, values, mask, **kwargs)
    err_loop = rel_err(ours, compute_gae_loop(rewards, values, mask, **kwargs))
    err_f64 = rel_err(ours, compute_gae_loop(rewards.double(), values.double(), mask.double(), **kwargs))
    print(f"GAE B={args.batch} T={args.length} on {args.device}, {torch.get_num_threads()} torch threads")
    print(f"  per-time-step loop : {t_loop * 1e3:9.2f} ms")
    print(f"  compute_gae (scan) : {t_fast * 1e3:9.2f} ms")
    print(f"  speed-up           : {t_loop / t_fast:9.1f}x")
    print(f"  max relative error vs the float32 loop: {err_loop:.2e}, vs a float64 loop: {err_f64:.2e}")


if __name__ == "__main__":
    main()
