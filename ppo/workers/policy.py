"""The policy (actor) worker: Megatron GPT, logprobs, the clipped PPO update, a supervised warm start, export."""

from __future__ import annotations

import torch

from ppo.algorithms.policy_loss import clipped_pg_loss
from ppo.cluster.placement import node_address
from ppo.data.batch import Batch, to_device
from ppo.models.architecture import Architecture
from ppo.models.builder import build_gpt_model
from ppo.models.forward import token_logprobs
from ppo.models.training import ModelUpdater
from ppo.workers.buckets import RefitGroup, ipc_handle, layer_chunks, pack, plan_chunk_buckets
from ppo.workers.megatron_worker import MegatronWorker
from ppo.workers.specs import MegatronPolicy


class PolicyWorker(MegatronWorker):
    def __init__(self, spec: MegatronPolicy, model_path: str, *, with_reference: bool = False, **kwargs):
        """The policy (and its frozen reference) from the HF checkpoint folder ``model_path``: each rank reads only
        its own shard of the weights (:meth:`read_shard`)."""
        super().__init__(spec, **kwargs)
        from ppo.models.convert import load_megatron_state
        self.arch = Architecture.from_pretrained(model_path)
        shard = self.read_shard(model_path, self.arch)
        model = build_gpt_model(self.arch, device=self.device, **spec.model_options())
        load_megatron_state(model, shard)
        self.updater = ModelUpdater(model, spec.optimizer)
        self.reference = None
        if with_reference:
            self.reference = build_gpt_model(self.arch, device=self.device, **spec.model_options()).eval()
            load_megatron_state(self.reference, shard)
            self.reference.requires_grad_(False)

    def logprobs(self, batch: Batch, temperature: float = 1.0, reference: bool = False) -> torch.Tensor:
        batch = self.receive(batch)
        model = self.reference if reference else None

        def fn(module, mb):
            return token_logprobs(model or module, mb.input_ids, mb.segment_ids, temperature=temperature,
                                  chunk_size=self.spec.logprob_chunk_size)

        return self.forward_rows(batch, fn)

    def train(self, batch: Batch, *, num_minibatches: int, seed: int, temperature: float = 1.0) -> list[dict]:
        """One PPO epoch: an optimizer step per shuffled minibatch; returns each step's reduced metrics.

        ``batch`` needs ``logp_old``, ``advantages`` (and ``logp_ref`` with a KL loss, ``rewards`` with NLL).
        """
        batch = self.receive(batch)
        results = []
        for minibatch in self.minibatches(batch, num_minibatches, seed):
            mask = minibatch.response_mask
            counts = to_device(dict(
                global_valid_toks=mask.sum().clamp(min=1),
                global_valid_seqs=(mask.sum(-1) > 0).sum().clamp(min=1),
                global_positive_toks=(mask * (minibatch.rewards > 0)[:, None]).sum().clamp(min=1)
                if minibatch.has("rewards") else None,
            ), self.device)

            def loss_fn(module, mb, counts=counts):
                logp = token_logprobs(module, mb.input_ids, mb.segment_ids, temperature=temperature,
                                      chunk_size=self.spec.logprob_chunk_size)
                return clipped_pg_loss(
                    logp, mb.logp_old, mb.advantages, mb.response_mask, self.spec.loss,
                    generation_logprobs=mb.logp_gen, ref_logprobs=mb.get("logp_ref"),
                    sequence_rewards=mb.get("rewards"), **counts,
                )

            self.updater.module.train()
            results.append(self.updater.step(self.microbatches(minibatch), loss_fn))
        return results

    def supervised_step(self, batch: Batch, lr: float) -> dict:
        """One optimizer step of next-token NLL on ``response_mask`` tokens (the warm start that teaches the format)."""
        batch = self.receive(batch)
        n_tokens = batch.response_mask.sum().clamp(min=1).to(self.device)

        def loss_fn(module, mb):
            logp = token_logprobs(module, mb.input_ids, mb.segment_ids, chunk_size=self.spec.logprob_chunk_size)
            nll = -(logp * mb.response_mask).sum() / n_tokens
            return nll, {"loss": nll.detach()}

        self.updater.module.train()
        return self.updater.step(self.microbatches(batch), loss_fn, lr=lr)

    def supervised_steps(self, batches: list[Batch], lr: float) -> list[dict]:
        """:meth:`supervised_step` on each batch in turn, in one call (the warm start's steps without a round trip
        each); every step's metrics."""
        return [self.supervised_step(batch, lr) for batch in batches]

    def reset_optimizer_state(self) -> None:
        self.updater.reset_optimizer_state()

    def offload(self, keep_weights: bool = False) -> None:
        if self.reference is not None and torch.cuda.is_available():
            self.reference.cpu()  # before the updater's empty_cache, which then releases its blocks too
        super().offload(keep_weights)

    def onload(self) -> None:
        super().onload()
        if self.reference is not None and torch.cuda.is_available():
            self.reference.cuda()

    def export(self) -> dict | None:
        return self.hf_state(self.arch)

    def write_weights(self, path: str) -> None:
        """The policy as one HF-named safetensors file at ``path`` (rank 0 writes; a collective)."""
        super().write_weights(path, self.arch)

    def load_weights(self, weights: str) -> None:
        """Replace the policy's weights with the HF safetensors ``weights`` (each rank reads its shard; the
        optimizer's main parameters follow): a warm start taken from the cache (:mod:`ppo.loop.warm_start_cache`)."""
        from ppo.models.convert import load_megatron_state

        load_megatron_state(self.updater.module, self.read_shard(weights, self.arch))
        self.updater.optimizer.reload_model_params()

    def load_reference(self, weights: str) -> None:
        """Replace the frozen reference's weights with the HF safetensors ``weights`` (a file or folder; each rank
        reads its shard): the trainer anchors it to the warm-started policy."""
        from ppo.models.convert import load_megatron_state

        load_megatron_state(self.reference, self.read_shard(weights, self.arch))

    # ---------------------------------------------------------------- refit: weights straight to the engines
    def prepare_refit(self, senders: list[int], bucket_bytes: int) -> list | None:
        """Plan the refit's buckets without moving a weight: whole chunks (the embedding, a layer, the head) of at
        most ``bucket_bytes`` in HF names, their names and shapes found by converting ``meta`` tensors.  Returns the
        buckets' metadata (:class:`ppo.workers.buckets.TensorEntry` lists) on ``senders``, else None; every rank
        then stages each bucket in turn (:meth:`stage_refit_bucket`)."""
        from megatron.core import parallel_state

        from ppo.models.convert import megatron_to_hf

        state = self._refit_weights()
        tp = parallel_state.get_tensor_model_parallel_world_size()
        chunks = layer_chunks(list(state))
        meta = [megatron_to_hf([{k: torch.empty_like(state[k], device="meta") for k in chunk}] * tp, self.arch)
                for chunk in chunks]
        plan = plan_chunk_buckets(meta, bucket_bytes)
        self._refit_plan = [([k for i in indices for k in chunks[i]], entries) for indices, entries in plan]
        self._refit_senders = set(senders)
        self._refit_buffer = (None, None)
        return [entries for _, entries in self._refit_plan] if self.rank in senders else None

    def _refit_weights(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.updater.module.state_dict().items() if not k.endswith("_extra_state")}

    def stage_refit_bucket(self, index: int) -> None:
        """Every rank: gather bucket ``index``'s chunks over TP (on the device, a bucket at a time, so no more than
        one bucket of gathered weights exists); senders convert them to HF names and pack the bucket's buffer,
        which replaces the previous bucket's."""
        from megatron.core import parallel_state

        from ppo.models.convert import megatron_to_hf

        self._refit_buffer = (None, None)
        keys, entries = self._refit_plan[index]
        state = self._refit_weights()
        local = {k: state[k].detach().contiguous() for k in keys}
        tp = parallel_state.get_tensor_model_parallel_world_size()
        shards = [local]
        if tp > 1:
            group = parallel_state.get_tensor_model_parallel_group()
            shards = [{} for _ in range(tp)]
            for key, tensor in local.items():
                parts = [torch.empty_like(tensor) for _ in range(tp)]
                torch.distributed.all_gather(parts, tensor, group=group)
                for rank, part in enumerate(parts):
                    shards[rank][key] = part
        if self.rank in self._refit_senders:
            hf = megatron_to_hf(shards, self.arch)
            self._refit_buffer = (index, pack(hf, entries, self.device))

    def _bucket_buffer(self, index: int) -> torch.Tensor:
        if self._refit_buffer[0] != index:
            raise RuntimeError(f"refit bucket {index} was not staged (staged: {self._refit_buffer[0]})")
        return self._refit_buffer[1]

    def refit_handle(self, index: int) -> bytes:
        """An IPC handle to bucket ``index`` for an engine on this rank's GPU."""
        return ipc_handle(self._bucket_buffer(index))

    def refit_address(self) -> tuple[str, int]:
        """This node's IP and a port free on it, where the refit group's store will listen."""
        return node_address()

    def join_refit_group(self, host: str, port: int, rank: int, world_size: int) -> None:
        self.refit_group = RefitGroup(host, port, rank, world_size)

    def broadcast_bucket(self, index: int) -> None:
        self.refit_group.broadcast(self._bucket_buffer(index))

    def finish_refit(self) -> None:
        self._refit_plan = None
        self._refit_buffer = (None, None)

