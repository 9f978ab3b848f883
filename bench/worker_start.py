"""What a Megatron worker process costs to start on CPU, with ``ppo.models.cpu_compat``'s import patch (6: Megatron's
``jit_fuser`` as the identity, no wandb) and without it, measured in the same invocation.

    .venv/bin/python bench/worker_start.py              # 3 processes each way, taking turns
    .venv/bin/python bench/worker_start.py --repeats 5

Each process does what a worker does first: joins a torch.distributed world of one (importing Megatron-Core through
``ppo.models.distributed.initialize``), builds a small GPT model, takes one optimizer step and saves a checkpoint.
"Without" turns the patch off in that process before anything imports Megatron.  The table gives the median CPU
time (user + system, the steadier of the two when other jobs share the cores) and wall time of the whole process.
Numbers are seconds on this machine in this invocation; on a shared machine, hold its lock while this runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from setup_time import PYTHON, ROOT, timed, tree_env  # bench/setup_time.py (bench/ is sys.path[0])

WORKER = """
import sys, tempfile
if sys.argv[1] == "without":
    import ppo.models.cpu_compat as cpu_compat
    cpu_compat._import_megatron_eagerly = lambda: None
import torch
from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.checkpoint import save_checkpoint
from ppo.models.distributed import initialize
from ppo.models.forward import token_logprobs
from ppo.models.optim import OptimizerSettings
from ppo.models.parallel import ParallelConfig
from ppo.models.training import ModelUpdater

initialize(ParallelConfig())
arch = Architecture("qwen2", 64, 32, 2, 4, 2, 64, 1e-6, 10000.0, 64, False, True)
updater = ModelUpdater(build_gpt_model(arch), OptimizerSettings(lr=1e-3))
ids = torch.randint(0, arch.vocab_size, (2, 8))
updater.step([{"input_ids": ids, "segment_ids": torch.ones_like(ids)}],
             lambda module, mb: (-token_logprobs(module, mb["input_ids"], mb["segment_ids"]).mean(), {}))
save_checkpoint(updater, tempfile.mkdtemp())
print("wandb" in sys.modules)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="processes each way (median)")
    args = parser.parse_args()
    env = {**tree_env(ROOT), "MASTER_PORT": "0"}
    times: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        for _ in range(args.repeats):
            for way in times:
                wall, cpu, out = timed([str(PYTHON), "-W", "ignore", str(script), way], ROOT, env)
                assert out.strip() == ("True" if way == "without" else "False"), (way, out)
                times[way].append((wall, cpu))
    print(f"{'worker process':28s}{'CPU (median)':>15s}{'wall (median)':>15s}")
    for way, runs in times.items():
        print(f"{way + ' patch 6':28s}{statistics.median(c for _, c in runs):14.2f}s"
              f"{statistics.median(w for w, _ in runs):14.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
