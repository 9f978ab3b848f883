"""The part of the policy and value workers that is the same: one rank of a Megatron model in its own process.

A worker group of ``world_size`` Ray actors forms its own torch.distributed world (gloo on CPU, NCCL on GPUs);
the actor and the critic are separate groups and may use different parallel layouts.  Every rank receives the
whole (mini)batch: tensor-parallel ranks use all of it, data-parallel ranks take their slice of the rows, and
losses are normalised by counts over the whole minibatch, so the summed gradients are exact.
"""

from __future__ import annotations

import os

import torch

from ppo.models.packing import token_budget_microbatches
from ppo.rollout.batch import select, trim
from ppo.workers.specs import MegatronModelSpec  # noqa: F401 - defined there (no torch), exported here too


class MegatronWorker:
    def __init__(self, spec: MegatronModelSpec, *, rank: int, world_size: int, master_port: int, seed: int):
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                          MASTER_ADDR=os.environ.get("PPO_MASTER_ADDR", "127.0.0.1"), MASTER_PORT=str(master_port))
        if spec.num_threads:
            torch.set_num_threads(spec.num_threads)
        from ppo.models.parallel import initialize

        initialize(spec.parallel, seed=seed)
        self.spec = spec
        self.rank = rank
        self.trainer = None

    def _my_rows(self, batch: dict) -> dict:
        from megatron.core import parallel_state

        dp_size = parallel_state.get_data_parallel_world_size()
        if dp_size == 1:
            return batch
        rows = torch.arange(batch["input_ids"].shape[0])
        return select(batch, rows[parallel_state.get_data_parallel_rank() :: dp_size])

    def microbatches(self, batch: dict) -> list[dict]:
        """This rank's rows in micro-batches of at most ``micro_batch_tokens`` padded tokens."""
        batch = self._my_rows(batch)
        lengths = batch["segment_ids"].ne(0).sum(-1).tolist()
        if not lengths:
            return []
        groups = token_budget_microbatches(lengths, max(self.spec.micro_batch_tokens, max(lengths)))
        return [trim(select(batch, g)) | {"_rows": torch.tensor(g)} for g in groups]

    @torch.no_grad()
    def forward_rows(self, batch: dict, fn) -> torch.Tensor:
        """``fn(module, microbatch) -> [b, t]`` over every row of ``batch``, reassembled as ``[B, T]``."""
        self.trainer.module.eval()
        out = torch.zeros(batch["input_ids"].shape, dtype=torch.float32)
        for mb in self.microbatches(batch):
            values = fn(self.trainer.module, mb).float()
            out[mb["_rows"], : values.shape[1]] = values
        return self._gather_rows(out, batch)

    def _gather_rows(self, out: torch.Tensor, batch: dict) -> torch.Tensor:
        from megatron.core import parallel_state

        dp_size = parallel_state.get_data_parallel_world_size()
        if dp_size == 1:
            return out
        full = torch.zeros(batch["input_ids"].shape, dtype=torch.float32)
        pieces = [torch.zeros_like(out) for _ in range(dp_size)]
        torch.distributed.all_gather(pieces, out, group=parallel_state.get_data_parallel_group())
        rows = torch.arange(full.shape[0])
        for r, piece in enumerate(pieces):
            mine = rows[r::dp_size]
            full[mine] = piece[: len(mine)]
        return full

    def minibatches(self, batch: dict, num_minibatches: int, seed: int) -> list[dict]:
        """Shuffled, near-equal row splits of the batch (the same on every rank: the seed is shared)."""
        n = batch["input_ids"].shape[0]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        return [trim(select(batch, part)) for part in order.chunk(min(num_minibatches, n))]

    def save(self, path: str) -> None:
        from ppo.models.checkpoint import save_checkpoint

        save_checkpoint(self.trainer, path)

    def load(self, path: str) -> int:
        from ppo.models.checkpoint import load_checkpoint

        load_checkpoint(self.trainer, path)
        return self.trainer.steps_done

    def hf_state(self, arch, value_head: bool = False) -> dict | None:
        """Full HF-named weights gathered over TP (rank 0 returns them; other ranks None). PP is not supported."""
        from megatron.core import parallel_state

        from ppo.models.convert import megatron_to_hf

        state = {k: v.detach().cpu() for k, v in self.trainer.module.state_dict().items()
                 if not k.endswith("_extra_state")}
        tp = parallel_state.get_tensor_model_parallel_world_size()
        shards = [state]
        if tp > 1:
            shards = [None] * tp
            torch.distributed.all_gather_object(shards, state, group=parallel_state.get_tensor_model_parallel_group())
        return megatron_to_hf(shards, arch, value_head=value_head) if self.rank == 0 else None

    def offload(self) -> None:
        """Give the GPU memory to the colocated generation engine (no-op on CPU)."""
        self.trainer.offload()

    def onload(self) -> None:
        self.trainer.onload()

    def ready(self) -> bool:
        return True
