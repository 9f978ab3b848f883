"""One rank of the tensor-parallel test: run the actor and the critic on a TP shard and save what it computed."""

from __future__ import annotations

import os
import sys

import torch


def compute(hf_dir: str, world_size: int, tensor: int) -> dict:
    """Logits, logprobs, values and first-step gradients (HF layout, gathered over TP) for the fixed batch."""
    from megatron.core import parallel_state

    from ppo.models.architecture import Architecture
    from ppo.models.builder import build_gpt_model
    from ppo.models.convert import hf_to_megatron, load_hf_state_dict, load_megatron_state, megatron_to_hf
    from ppo.models.forward import full_logits, token_logprobs
    from ppo.models.value import build_value_model, token_values

    arch = Architecture.from_pretrained(hf_dir)
    hf = load_hf_state_dict(hf_dir)
    tp_rank, tp_size = parallel_state.get_tensor_model_parallel_rank(), tensor
    policy = build_gpt_model(arch)
    load_megatron_state(policy, hf_to_megatron(hf, arch, tp_rank=tp_rank, tp_size=tp_size))
    critic = build_value_model(arch)
    load_megatron_state(critic, hf_to_megatron(hf, arch, tp_rank=tp_rank, tp_size=tp_size, value_head=True))

    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, arch.vocab_size, (2, 20), generator=g)
    segments = torch.tensor([[1] * 20, [1] * 8 + [2] * 9 + [0] * 3])
    weights = torch.randn(2, 20, generator=g)
    with torch.no_grad():
        logits = full_logits(policy, ids, segments)
    logprobs = token_logprobs(policy, ids, segments, chunk_size=7)
    values = token_values(critic, ids, segments)
    ((logprobs * weights).sum() + (values * weights).sum()).backward()

    def gathered_grads(model, value_head):
        grads = {k: p.grad for k, p in model.named_parameters()}
        for name, grad in grads.items():
            if name.endswith(("q_layernorm.weight", "k_layernorm.weight")):
                # replicated, but each rank's heads give it a part of the gradient: training sums the parts
                # (Megatron's finalize_model_grads, with config.qk_layernorm), and so does this
                torch.distributed.all_reduce(grad, group=parallel_state.get_tensor_model_parallel_group())
        shards = [None] * tp_size
        torch.distributed.all_gather_object(shards, grads, group=parallel_state.get_tensor_model_parallel_group())
        return megatron_to_hf(shards, arch, value_head=value_head)

    return {
        "logits": logits,
        "logprobs": logprobs.detach(),
        "values": values.detach(),
        "policy_grads": gathered_grads(policy, False),
        "critic_grads": gathered_grads(critic, True),
    }


def main(hf_dir: str, out: str, tensor: int) -> None:
    from ppo.models.distributed import initialize
    from ppo.models.parallel import ParallelConfig

    initialize(ParallelConfig(tensor=tensor), seed=1234)
    if os.environ.get("RESUME_FROM"):
        result = resume_and_step(os.environ["RESUME_FROM"], hf_dir, tensor)
    elif os.environ.get("TRAIN_STEPS"):
        result = train_critic(hf_dir, tensor, int(os.environ["TRAIN_STEPS"]))
    else:
        result = compute(hf_dir, torch.distributed.get_world_size(), tensor)
    if torch.distributed.get_rank() == 0:
        torch.save(result, out)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()



def resume_and_step(ckpt_dir: str, hf_dir: str, tensor: int) -> dict:
    """Load a critic checkpoint into this TP layout, report values, take one step, return full HF-layout params."""
    from megatron.core import parallel_state

    from ppo.models.architecture import Architecture
    from ppo.models.checkpoint import load_checkpoint
    from ppo.models.convert import megatron_to_hf
    from ppo.models.training import ModelUpdater
    from ppo.models.value import build_value_model, token_values
    from tests.models.test_training import critic_batch, critic_loss, critic_settings

    arch = Architecture.from_pretrained(hf_dir)
    trainer = ModelUpdater(build_value_model(arch), critic_settings())
    load_checkpoint(trainer, ckpt_dir)
    batch = critic_batch(arch.vocab_size, seed=9)
    with torch.no_grad():
        values = token_values(trainer.module, batch["input_ids"], batch["segment_ids"])
    trainer.step([batch], critic_loss(batch, batch["mask"].sum()))
    shards = [None] * tensor
    state = {k: v.detach() for k, v in trainer.module.state_dict().items() if not k.endswith("_extra_state")}
    torch.distributed.all_gather_object(shards, state, group=parallel_state.get_tensor_model_parallel_group())
    return {"values": values, "params": megatron_to_hf(shards, arch, value_head=True), "steps": trainer.steps_done}


def train_critic(hf_dir: str, tensor: int, steps: int) -> dict:
    """``steps`` critic updates from the HF weights through ``ModelUpdater`` (Megatron's DDP, finalize_model_grads,
    optimizer): every TP rank's state dict, and the full HF-layout parameters, after them."""
    from megatron.core import parallel_state

    from ppo.models.architecture import Architecture
    from ppo.models.convert import hf_to_megatron, load_hf_state_dict, load_megatron_state, megatron_to_hf
    from ppo.models.training import ModelUpdater
    from ppo.models.value import build_value_model
    from tests.models.test_training import critic_batch, critic_loss, critic_settings

    arch = Architecture.from_pretrained(hf_dir)
    critic = build_value_model(arch)
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    load_megatron_state(critic, hf_to_megatron(load_hf_state_dict(hf_dir), arch, tp_rank=tp_rank, tp_size=tensor,
                                               value_head=True))
    trainer = ModelUpdater(critic, critic_settings())
    for seed in range(steps):
        batch = critic_batch(arch.vocab_size, seed=seed)
        trainer.step([batch], critic_loss(batch, batch["mask"].sum()))
    shards = [None] * tensor
    state = {k: v.detach() for k, v in trainer.module.state_dict().items() if not k.endswith("_extra_state")}
    torch.distributed.all_gather_object(shards, state, group=parallel_state.get_tensor_model_parallel_group())
    return {"params": megatron_to_hf(shards, arch, value_head=True), "ranks": shards}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(os.environ.get("TP", "2")))
