"""One rank of the TP-2 start-up test: the real policy and critic workers start from an HF folder, the critic from
the policy's weights as they are in memory (changed as a warm start changes them, written once by policy rank 0);
saves what each rank read and built (``<out>.rank<R>.pt``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch


def state(worker) -> dict:
    return {k: v.detach().clone() for k, v in worker.updater.module.state_dict().items()
            if not k.endswith("_extra_state")}


def main(hf_dir: str, out: str) -> None:
    from ppo.models.parallel import ParallelConfig
    from ppo.workers.policy import PolicyWorker
    from ppo.workers.specs import MegatronCritic, MegatronPolicy
    from ppo.workers.value import ValueWorker

    rank = int(os.environ["RANK"])
    common = dict(rank=rank, world_size=2, master_addr="127.0.0.1", master_port=int(os.environ["MASTER_PORT"]),
                  seed=0)
    policy = PolicyWorker(MegatronPolicy(parallel=ParallelConfig(tensor=2)), hf_dir, **common)
    policy_bytes, policy_state = policy.startup_bytes_read, state(policy)
    with torch.no_grad():  # a stand-in for the warm start: weights that exist only in memory (doubled: exact)
        for parameter in policy.updater.module.parameters():
            parameter.mul_(2)
    snapshot = str(Path(out).with_name("policy.safetensors"))
    policy.write_weights(snapshot)
    torch.distributed.barrier()  # rank 0 has written the file the critic's ranks read
    critic = ValueWorker(MegatronCritic(parallel=ParallelConfig(tensor=2)), hf_dir, weights=snapshot, **common)
    torch.save({"policy_bytes": policy_bytes, "critic_bytes": critic.startup_bytes_read, "policy": policy_state,
                "critic": state(critic)}, f"{out}.rank{rank}.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
