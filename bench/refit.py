"""Refit throughput and what crosses the driver: the policy streaming its weights to 1 and to 2 vLLM engines.

    .venv/bin/python bench/refit.py                      # ~100 MB float32 model, 3 refits per setting
    .venv/bin/python bench/refit.py --hidden 1024 --layers 12 --bucket-mb 64

One Ray node with 2 logical GPUs (this machine has none; workers run on CPU, as in the tests).  The policy is one
Megatron rank on GPU 0; engine 0 shares that GPU and receives the weights by IPC (a shared-memory buffer here, CUDA
IPC on GPUs); engine 1 sits on GPU 1 and receives them over a gloo broadcast group (NCCL on GPUs).  The placement
plan picks those transports, as in a run.

Baseline in the same run: the old path, where the driver gathers the whole model from the policy through Ray's
object store and sends it to every engine (``policy.export()`` then ``engine.refit(weights)``).  For each, the
seconds per GB of model and the bytes that crossed the driver (received and sent, pickled) are printed.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bucket-mb", type=int, default=32)
    args = parser.parse_args()

    import ray

    from ppo.cluster.placement import reserve
    from ppo.cluster.plan import EngineLayout, GroupLayout, plan_placement
    from ppo.data.gsm8k import BUNDLED_GSM8K_DIR
    from ppo.data.tokenizer import build_gsm8k_tokenizer
    from ppo.models.tiny import create_tiny_model
    from ppo.rollout.generation import EnginePool, start_generation_worker
    from ppo.rollout.settings import VLLMGeneration
    from ppo.workers.group import PolicyGroup
    from ppo.workers.refit import Refitter
    from ppo.workers.specs import MegatronPolicy

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, num_gpus=2, _node_ip_address="127.0.0.2", include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = build_gsm8k_tokenizer(f"{BUNDLED_GSM8K_DIR}/train.jsonl")
        path = create_tiny_model(f"{tmp}/model", tokenizer, hidden_size=args.hidden, num_layers=args.layers,
                                 num_attention_heads=args.hidden // 64, num_key_value_heads=args.hidden // 128,
                                 intermediate_size=args.hidden * 3, tie_word_embeddings=False)
        cfg = VLLMGeneration(model_path=str(path), dtype="float32", max_model_len=128, kv_cache_bytes=32 << 20,
                             refit_bucket_bytes=args.bucket_mb << 20)
        for engines in (1, 2):
            plan = plan_placement(nodes=1, gpus_per_node=2, groups=[GroupLayout("policy")],
                                  generation=EngineLayout(engines), allow_idle_gpus=True)
            placement = reserve(plan)
            policy = PolicyGroup(MegatronPolicy(num_threads=1), str(path), with_reference=False, placement=placement)
            actors = [start_generation_worker(cfg, e, **placement.options("generation", e)) for e in range(engines)]
            ray.get([a.ready.remote() for a in actors])
            routes = plan.refit_routes()
            refitter = Refitter(policy, EnginePool(actors), routes, cfg.refit_bucket_bytes)
            stats = [refitter() for _ in range(args.repeats)]
            gigabytes = stats[0]["refit_bytes"] / 1e9
            seconds = statistics.median(s["refit_seconds"] for s in stats)
            baseline, driver = [], 0
            for _ in range(args.repeats):
                start = time.perf_counter()
                weights = policy.export()
                ray.get([a.refit.remote(weights) for a in actors])
                baseline.append(time.perf_counter() - start)
                driver = len(pickle.dumps(weights)) * (1 + engines)  # received once, sent to every engine
            transports = "+".join(r.transport for r in routes)
            rows.append((engines, transports, seconds / gigabytes, stats[0]["refit_driver_bytes"],
                         statistics.median(baseline) / gigabytes, driver, stats[0]["refit_buckets"]))
            policy.kill()
            for actor in actors:
                ray.kill(actor)
            placement.release()
    ray.shutdown()

    print(f"refit of {gigabytes * 1e3:.0f} MB ({args.layers} layers, hidden {args.hidden}, float32), CPU, "
          f"buckets of {args.bucket_mb} MB ({rows[0][6]:.0f} per refit)")
    print(f"{'engines':>7}  {'transports':<14} {'streamed s/GB':>13} {'driver bytes':>12}   "
          f"{'via driver s/GB':>15} {'driver bytes':>12}  ratio")
    for engines, transports, per_gb, driver_bytes, base_per_gb, base_bytes, _ in rows:
        print(f"{engines:>7}  {transports:<14} {per_gb:>13.2f} {driver_bytes:>12,.0f}   {base_per_gb:>15.2f} "
              f"{base_bytes:>12,.0f}  {base_per_gb / per_gb:4.1f}x")


if __name__ == "__main__":
    main()
