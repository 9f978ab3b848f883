"""One rank of the sequence-parallel test: the policy's and the critic's forward, and one training step of each through
``ModelUpdater`` (Megatron's DDP, gradient finalisation, grad norm), on padded micro-batches.

The layout comes from the environment (``TP``, ``SEQUENCE_PARALLEL``); ``tests/models/test_sequence_parallel.py`` runs
it as two gloo ranks with TP 2 and sequence parallelism, and in its own process at TP 1.
"""

from __future__ import annotations

import os
import sys

import torch

from ppo.models.recompute import Recompute

LENGTHS = ((13, 6, 10), (9, 4, 7))  # two micro-batches of rows of different lengths, odd widths: both get padded
PROMPT = 3  # the first tokens of a row are its prompt: no loss on them

RECOMPUTE = {"none": Recompute(), "selective": Recompute("selective"), "full": Recompute("full", "uniform", 1)}
"""Activation recomputation by name (``RECOMPUTE`` in the environment: one name per model folder)."""


def microbatches(vocab: int, multiple: int) -> list[dict]:
    """Right-padded micro-batches as the workers build them (cut to the longest row, then widened to ``multiple``
    by :func:`ppo.data.batch.pad_width`), with random advantages, returns and old-logprob offsets, as dicts."""
    from ppo.data.batch import Batch, pad_width

    g = torch.Generator().manual_seed(11)
    out = []
    for lengths in LENGTHS:
        width = max(lengths)
        real = torch.arange(width) < torch.tensor(lengths)[:, None]
        response = (real & (torch.arange(width) >= PROMPT)).float()
        padded = pad_width(Batch(
            input_ids=torch.randint(1, vocab, real.shape, generator=g) * real,
            segment_ids=real.long(),
            response_mask=response,
            advantages=torch.randn(real.shape, generator=g) * response,
            returns=torch.randn(real.shape, generator=g) * response,
            # the old policy a little off the current one, well inside the clip range: every token has a gradient
            # (padded as the token field logp_old, used as an offset)
            logp_old=(torch.rand(real.shape, generator=g) - 0.5) * 0.2 * response,
        ), multiple).fields()
        out.append(padded | {"logp_offset": padded.pop("logp_old")})
    return out


def gathered(tensors: dict, arch, *, value_head: bool) -> dict:
    """Megatron-named tensors of this TP rank as the whole model's, in HF names."""
    from megatron.core import parallel_state

    from ppo.models.convert import megatron_to_hf

    group = parallel_state.get_tensor_model_parallel_group()
    shards = [None] * torch.distributed.get_world_size(group)
    torch.distributed.all_gather_object(shards, tensors, group=group)
    return megatron_to_hf(shards, arch, value_head=value_head)


def train_one_step(model, arch, batches, loss_of, *, value_head: bool) -> dict:
    """Forward without gradients (``outputs``), then one ``ModelUpdater`` step: its loss and grad norm, and every
    parameter's gradient after Megatron's finalisation (the DDP buffer it left, HF names)."""
    from ppo.models.optim import OptimizerSettings
    from ppo.models.training import ModelUpdater

    trainer = ModelUpdater(model, OptimizerSettings(lr=1e-3, clip_grad=0.0))  # no clipping: gradients stay as summed
    model.eval()
    with torch.no_grad():
        outputs = [loss_of.output(model, mb) for mb in batches]
    tokens = sum(mb["response_mask"].sum() for mb in batches)
    model.train()
    metrics = trainer.step([mb | {"old": out} for mb, out in zip(batches, outputs)],
                           lambda module, mb: loss_of(module, mb, tokens))
    grads = {name: p.main_grad.detach().clone() for name, p in model.named_parameters()}
    return {"outputs": outputs, "loss": metrics["loss"], "grad_norm": metrics["grad_norm"],
            "grads": gathered(grads, arch, value_head=value_head)}


class PolicyLoss:
    @staticmethod
    def output(module, mb):
        from ppo.models.forward import token_logprobs

        return token_logprobs(module, mb["input_ids"], mb["segment_ids"], chunk_size=5)

    def __call__(self, module, mb, tokens):
        from ppo.algorithms.policy_loss import clipped_pg_loss

        return clipped_pg_loss(self.output(module, mb), mb["old"] + mb["logp_offset"], mb["advantages"],
                               mb["response_mask"], global_valid_toks=tokens)


class ValueLoss:
    @staticmethod
    def output(module, mb):
        from ppo.models.value import token_values

        return token_values(module, mb["input_ids"], mb["segment_ids"])

    def __call__(self, module, mb, tokens):
        from ppo.algorithms.critic_loss import value_loss

        return value_loss(self.output(module, mb), mb["old"], mb["returns"], mb["response_mask"], clip_range=0.2,
                          global_valid_toks=tokens)


def compute(hf_dir: str, *, sequence_parallel: bool, recompute: str = "none") -> dict:
    """The policy's and the critic's results at this process's TP layout, with activation recomputation
    (:data:`RECOMPUTE`), on micro-batches padded to a multiple of 2 (what TP 2 with sequence parallelism needs) at
    every layout: the same inputs everywhere."""
    from megatron.core import parallel_state

    from ppo.models.architecture import Architecture
    from ppo.models.builder import build_gpt_model
    from ppo.models.convert import hf_to_megatron, load_hf_state_dict, load_megatron_state
    from ppo.models.parallel import ParallelConfig
    from ppo.models.value import build_value_model
    from ppo.workers.specs import MegatronModelSpec

    arch = Architecture.from_pretrained(hf_dir)
    hf = load_hf_state_dict(hf_dir)
    tp_rank, tp_size = (parallel_state.get_tensor_model_parallel_rank(),
                        parallel_state.get_tensor_model_parallel_world_size())
    multiple = MegatronModelSpec(parallel=ParallelConfig(tensor=2, sequence_parallel=True)).sequence_multiple
    batches = microbatches(arch.vocab_size, multiple)
    result = {"segment_ids": [mb["segment_ids"] for mb in batches]}
    for name, build, value_head, loss in (("policy", build_gpt_model, False, PolicyLoss()),
                                          ("critic", build_value_model, True, ValueLoss())):
        model = build(arch, sequence_parallel=sequence_parallel, recompute=RECOMPUTE[recompute])
        load_megatron_state(model, hf_to_megatron(hf, arch, tp_rank=tp_rank, tp_size=tp_size, value_head=value_head))
        result[name] = train_one_step(model, arch, batches, loss, value_head=value_head)
    return result


def main(hf_dirs: list[str], out: str) -> None:
    from ppo.models.distributed import initialize
    from ppo.models.parallel import ParallelConfig

    sequence_parallel = os.environ.get("SEQUENCE_PARALLEL") == "1"
    recomputes = os.environ.get("RECOMPUTE", ",".join(["none"] * len(hf_dirs))).split(",")
    initialize(ParallelConfig(tensor=int(os.environ["TP"]), sequence_parallel=sequence_parallel), seed=1234)
    results = [compute(hf_dir, sequence_parallel=sequence_parallel, recompute=recompute)
               for hf_dir, recompute in zip(hf_dirs, recomputes, strict=True)]
    if torch.distributed.get_rank() == 0:
        torch.save(results, out)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
