"""One rank of the memory-plan test: build a Megatron policy or critic as the workers do, take one optimizer step,
and report the bytes its parameters, gradient buffers and optimizer state really hold (rank 0 writes them)."""

from __future__ import annotations

import json
import sys

import torch


def measure(kind: str, dtype: str, tensor: int, distributed: bool) -> dict:
    from megatron.core import parallel_state

    from ppo.models.architecture import Architecture
    from ppo.models.builder import build_gpt_model
    from ppo.models.forward import token_logprobs
    from ppo.models.optim import OptimizerSettings
    from ppo.models.training import ModelUpdater
    from ppo.models.value import build_value_model, token_values

    arch = Architecture.from_hf_config(json.loads(sys.argv[1]))
    build = build_value_model if kind == "critic" else build_gpt_model
    model = build(arch, dtype=dtype)
    trainer = ModelUpdater(model, OptimizerSettings(lr=1e-3, distributed_optimizer=distributed))
    ids = torch.randint(0, arch.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "segment_ids": torch.ones_like(ids)}

    def loss_fn(module, mb):
        if kind == "critic":
            out = token_values(module, mb["input_ids"], mb["segment_ids"])
        else:
            out = token_logprobs(module, mb["input_ids"], mb["segment_ids"])
        return out.float().pow(2).mean(), {}

    trainer.step([batch], loss_fn)
    # A master copy is a tensor of its own; the fp32 distributed optimizer's shards are views of the model's
    # parameters (the same storage) and cost nothing.
    model_storage = {p.untyped_storage().data_ptr() for p in model.parameters()}
    inner = [opt.optimizer for opt in getattr(trainer.optimizer, "chained_optimizers", [trainer.optimizer])]
    moments = sum(t.numel() * t.element_size() for opt in inner for state in opt.state.values()
                  for t in state.values() if torch.is_tensor(t) and t.dim() > 0)
    masters = sum(p.numel() * p.element_size() for opt in inner for group in opt.param_groups
                  for p in group["params"] if p.untyped_storage().data_ptr() not in model_storage)
    return {
        "rank": torch.distributed.get_rank(),
        "tp_rank": parallel_state.get_tensor_model_parallel_rank(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights": sum(p.numel() * p.element_size() for p in model.parameters()),
        "gradients": sum(b.grad_data.numel() * b.grad_data.element_size() for b in trainer.ddp.buffers),
        "optimizer": moments + masters,
    }


def main() -> None:
    import os

    from ppo.models.distributed import initialize
    from ppo.models.parallel import ParallelConfig

    kind, dtype, tensor, distributed, out = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6]
    initialize(ParallelConfig(tensor=tensor), seed=0)
    result = measure(kind, dtype, tensor, distributed)
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, result)
    if int(os.environ["RANK"]) == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
