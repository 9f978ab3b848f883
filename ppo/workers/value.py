"""The value (critic) worker: Megatron backbone with a scalar head; values and the clipped value update."""

from __future__ import annotations

import dataclasses

import torch

from ppo.algorithms.critic_loss import value_loss
from ppo.data.batch import Batch
from ppo.models.architecture import Architecture
from ppo.models.checkpoint import load_checkpoint
from ppo.models.training import ModelUpdater
from ppo.models.value import build_value_model, token_values
from ppo.workers.megatron_worker import MegatronWorker, torch_threads
from ppo.workers.specs import MegatronCritic


class ValueWorker(MegatronWorker):
    def __init__(self, spec: MegatronCritic, model_path: str | None, *, weights: str | None = None,
                 init_checkpoint: str | None = None, **kwargs):
        """The rank's process (torch, Megatron, its torch.distributed world), then the model (:meth:`build`) from
        ``model_path`` unless that is None: the group then builds it later, e.g. once the weights it starts from are
        written."""
        super().__init__(spec, **kwargs)
        if model_path is not None:
            self.build(model_path, weights=weights, init_checkpoint=init_checkpoint)

    def build(self, model_path: str, *, weights: str | None = None, init_checkpoint: str | None = None) -> None:
        """The architecture from the HF directory ``model_path``; the weights from the HF safetensors ``weights`` (a
        checkpoint folder or one file, e.g. the warm-started policy's; default ``model_path``), of which each rank
        reads only its own shard; then, with ``init_checkpoint`` (an earlier run's ``checkpoints/step_N/critic``),
        that critic's weights with a fresh optimizer."""
        from ppo.models.convert import VALUE_HEAD, load_megatron_state
        backbone = Architecture.from_pretrained(model_path)
        self.arch = dataclasses.replace(backbone, num_layers=self.spec.layers_of(backbone.num_layers))
        model = build_value_model(self.arch, init_std=self.spec.head_init_std, device=self.device,
                                  **self.spec.model_options())
        load_megatron_state(model, self.read_shard(weights or model_path, self.arch, value_head=True),
                            optional=(VALUE_HEAD,))
        self.updater = ModelUpdater(model, self.spec.optimizer)
        if init_checkpoint is not None:
            load_checkpoint(self.updater, init_checkpoint)
            self.updater.reset_optimizer_state()

    def export(self) -> dict | None:
        """The critic in HF names with its value head as ``score.weight``, gathered on rank 0 (a collective)."""
        return self.hf_state(self.arch, value_head=True)

    def values(self, batch: Batch) -> torch.Tensor:
        batch = self.receive(batch)
        return self.forward_rows(batch, lambda module, mb: token_values(module, mb.input_ids, mb.segment_ids))

    def train(self, batch: Batch, *, num_minibatches: int, seed: int, num_threads: int | None = None) -> list[dict]:
        """One critic epoch: an optimizer step per shuffled minibatch on ``returns`` with ``values`` as V_old (with
        ``num_threads`` torch threads, if given, for its duration)."""
        batch = self.receive(batch)
        results = []
        with torch_threads(num_threads):
            for minibatch in self.minibatches(batch, num_minibatches, seed):
                n_tokens = minibatch.response_mask.sum().clamp(min=1).to(self.device)

                def loss_fn(module, mb, n_tokens=n_tokens):
                    values = token_values(module, mb.input_ids, mb.segment_ids)
                    return value_loss(values, mb.values, mb.returns, mb.response_mask,
                                      clip_range=self.spec.value_clip, scale=self.spec.value_loss_scale,
                                      global_valid_toks=n_tokens)

                self.updater.module.train()
                results.append(self.updater.step(self.microbatches(minibatch), loss_fn))
        return results
