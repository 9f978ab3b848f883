"""The part of the policy and value workers that is the same: one rank of a Megatron model in its own process.

A worker group of ``world_size`` Ray actors forms its own torch.distributed world (gloo on CPU, NCCL on GPUs);
the actor and the critic are separate groups and may use different parallel layouts.  The device rule: batches
arrive on the CPU, every micro-batch goes to the worker's ``device`` (its first visible GPU, or the CPU) before it
reaches the model, and results leave on the CPU.  Every rank receives the
whole (mini)batch: tensor-parallel ranks use all of it, data-parallel ranks take their slice of the rows, and
losses are normalised by counts over the whole minibatch, so the summed gradients are exact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ppo.data.batch import Batch, pad_width, select, trim
from ppo.models.packing import token_budget_microbatches
from ppo.workers.specs import MegatronModelSpec


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """This process's torch threads set to ``count`` for the block (``None``: unchanged)."""
    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class MegatronWorker:
    def __init__(self, spec: MegatronModelSpec, *, rank: int, world_size: int, master_addr: str, master_port: int,
                 seed: int, log_file: str | None = None):
        from ppo.workers.logs import redirect_output

        redirect_output(log_file)
        # Ray shows this actor only its own GPU(s): its device is the first visible one (LOCAL_RANK 0), whatever
        # its rank in the group.
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0", MASTER_ADDR=master_addr,
                          MASTER_PORT=str(master_port))
        # the role's own count, else the share of the node's CPUs its placement gave (ppo.cluster.placement)
        torch.set_num_threads(spec.num_threads or int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
        from ppo.models.distributed import initialize

        initialize(spec.parallel, seed=seed)
        self.spec = spec
        self.rank = rank
        self.updater = None
        self.first_offload_at: float | None = None  # when this rank first gave up its GPU (placement.json)
        self.startup_bytes_read = 0  # HF weight bytes this rank read to build its models (read_shard)

    def receive(self, batch) -> Batch:
        """The whole batch from what the driver shipped this rank (:mod:`ppo.workers.traffic`: its pieces, the rest
        from its data-parallel peers); a batch sent by value as it came."""
        from megatron.core import parallel_state

        from ppo.workers.traffic import receive

        return receive(batch, parallel_state.get_data_parallel_group())

    def _my_rows(self, batch: Batch) -> Batch:
        from megatron.core import parallel_state

        dp_size = parallel_state.get_data_parallel_world_size()
        if dp_size == 1:
            return batch
        rows = torch.arange(batch.rows)
        return select(batch, rows[parallel_state.get_data_parallel_rank() :: dp_size])

    def microbatches(self, batch: Batch) -> list[Batch]:
        """This rank's rows in micro-batches of at most ``micro_batch_tokens`` padded tokens, on this rank's device."""
        return [mb for _, _, mb in self._cut(batch)]

    def _cut(self, batch: Batch) -> list[tuple[list[int], int, Batch]]:
        """This rank's micro-batches as ``(their row numbers in this rank's rows, their width before padding,
        the micro-batch on this rank's device)``.

        Each micro-batch is cut to its longest row, then padded to a multiple of ``spec.sequence_multiple`` (what
        sequence parallelism needs, :func:`ppo.data.batch.pad_width`); the token budget counts the padded
        width, so no micro-batch exceeds ``micro_batch_tokens``.
        """
        batch = self._my_rows(batch)
        lengths = batch.segment_ids.ne(0).sum(-1).tolist()
        if not lengths:
            return []
        padded = [self.spec.padded_length(n) for n in lengths]
        groups = token_budget_microbatches(padded, max(self.spec.micro_batch_tokens, max(padded)))
        cut = []
        for g in groups:
            mb = trim(select(batch, g))
            cut.append((g, mb.width, pad_width(mb, self.spec.sequence_multiple).to(self.device)))
        return cut

    @torch.no_grad()
    def forward_rows(self, batch: Batch, fn) -> torch.Tensor:
        """``fn(module, microbatch) -> [b, t]`` over every row of ``batch``, reassembled as ``[B, T]`` on the CPU
        (the columns a micro-batch was padded with are dropped: they may reach past ``T``)."""
        self.updater.module.eval()
        out = torch.zeros((batch.rows, batch.width), dtype=torch.float32, device=self.device)
        for rows, width, mb in self._cut(batch):
            values = fn(self.updater.module, mb).float()[:, :width]
            out[torch.tensor(rows).to(self.device), : values.shape[1]] = values
        return self._gather_rows(out, batch).cpu()

    def _gather_rows(self, out: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Every data-parallel rank's rows in one ``[B, T]`` (on the device: NCCL gathers device tensors)."""
        from megatron.core import parallel_state

        dp_size = parallel_state.get_data_parallel_world_size()
        if dp_size == 1:
            return out
        full = torch.zeros((batch.rows, batch.width), dtype=torch.float32, device=out.device)
        pieces = [torch.zeros_like(out) for _ in range(dp_size)]
        torch.distributed.all_gather(pieces, out, group=parallel_state.get_data_parallel_group())
        rows = torch.arange(full.shape[0], device=out.device)
        for r, piece in enumerate(pieces):
            mine = rows[r::dp_size]
            full[mine] = piece[: len(mine)]
        return full

    def minibatches(self, batch: Batch, num_minibatches: int, seed: int) -> list[Batch]:
        """Shuffled, near-equal row splits of the batch (the same on every rank: the seed is shared)."""
        n = batch.rows
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        return [trim(select(batch, part)) for part in order.chunk(min(num_minibatches, n))]

    def save(self, path: str) -> None:
        from ppo.models.checkpoint import save_checkpoint

        save_checkpoint(self.updater, path)

    def load(self, path: str) -> int:
        from ppo.models.checkpoint import load_checkpoint

        load_checkpoint(self.updater, path)
        return self.updater.steps_done

    def read_shard(self, weights: str, arch, *, value_head: bool = False) -> dict:
        """This rank's Megatron state dict from the HF safetensors ``weights`` (a checkpoint folder or one file):
        only its tensor-parallel part of its pipeline stage's layers is read (:class:`SafetensorsFiles`), so no
        rank holds the whole model at start-up; ``startup_bytes_read`` adds up what was read."""
        from megatron.core import parallel_state

        from ppo.models.convert import SafetensorsFiles, hf_to_megatron, pipeline_stage

        source = SafetensorsFiles(weights)
        stage = pipeline_stage(arch.num_layers, parallel_state.get_pipeline_model_parallel_rank(),
                               parallel_state.get_pipeline_model_parallel_world_size())
        shard = hf_to_megatron(source, arch, tp_rank=parallel_state.get_tensor_model_parallel_rank(),
                               tp_size=parallel_state.get_tensor_model_parallel_world_size(), value_head=value_head,
                               **stage)
        self.startup_bytes_read += source.bytes_loaded
        return shard

    def hf_state(self, arch, value_head: bool = False) -> dict | None:
        """Full HF-named weights on rank 0 (None on the other ranks); every rank must call it.  Only rank 0's
        tensor-parallel group gathers, onto rank 0 alone: the other ranks never hold more than their shard.  PP is
        not supported."""
        from megatron.core import parallel_state

        from ppo.models.convert import megatron_to_hf

        if parallel_state.get_data_parallel_rank() != 0:
            return None
        state = {k: v.detach().cpu() for k, v in self.updater.module.state_dict().items()
                 if not k.endswith("_extra_state")}
        tp = parallel_state.get_tensor_model_parallel_world_size()
        shards = [state]
        if tp > 1:
            shards = [None] * tp if self.rank == 0 else None
            torch.distributed.gather_object(state, shards, dst=parallel_state.get_tensor_model_parallel_src_rank(),
                                            group=parallel_state.get_tensor_model_parallel_group())
        return megatron_to_hf(shards, arch, value_head=value_head) if self.rank == 0 else None

    def write_weights(self, path: str, arch, value_head: bool = False) -> None:
        """This model's HF-named weights as one safetensors file at ``path``, written by rank 0 (a collective, see
        :meth:`hf_state`): what other ranks then read their shards from (:meth:`read_shard`)."""
        from safetensors.torch import save_file

        state = self.hf_state(arch, value_head=value_head)
        if state is not None:
            partial = f"{path}.partial"
            # megatron_to_hf's q, k, v (and gate, up) are views of one tensor, which safetensors refuses
            save_file({name: t.clone() for name, t in state.items()}, partial, metadata={"format": "pt"})
            os.replace(partial, path)

    def placement_info(self) -> dict:
        """Where this rank runs, as Ray and the environment say (for tests and the dry-run-versus-run check)."""
        import ray

        return {"rank": self.rank, "node_ip": ray.util.get_node_ip_address(), "gpu_ids": ray.get_gpu_ids(),
                "master_addr": os.environ["MASTER_ADDR"], "master_port": int(os.environ["MASTER_PORT"]),
                "local_rank": int(os.environ["LOCAL_RANK"]), "device": str(self.device), "pid": os.getpid(),
                "first_offload_at": self.first_offload_at, "threads": torch.get_num_threads(),
                "omp_threads": os.environ.get("OMP_NUM_THREADS"), "mkl_threads": os.environ.get("MKL_NUM_THREADS")}

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")

    def offload(self, keep_weights: bool = False) -> None:
        """Give the GPU memory to the colocated generation engine (no-op on CPU); ``keep_weights``: all but the
        parameters, which the refit still reads (:data:`ppo.workers.memory.REFIT_STEPS`)."""
        if self.first_offload_at is None:
            self.first_offload_at = time.time()
        self.updater.offload(keep_weights=keep_weights)

    def onload(self) -> None:
        self.updater.onload()

    def ready(self) -> bool:
        return True
