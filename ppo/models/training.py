"""One optimiser step of a Megatron model over micro-batches: Megatron DDP, Megatron's Adam(W), LR schedule.

The loss function comes from ``ppo.algorithms`` and is normalised by global counts, so the step *sums* the
micro-batch losses (no division by the number of micro-batches) and data-parallel gradients are summed too
(``calculate_per_token_loss``).  Gradient clipping and the gradient norm are Megatron's (global over TP/PP/DP).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ppo.algorithms.reduction import reduce_metrics
from ppo.models.optim import OptimizerSettings, learning_rate


class ModelUpdater:
    """Owns a model's DDP wrapper, optimizer and step counter; ``step()`` runs forward/backward and one update.

    ``module`` is the plain ``GPTModel`` to pass to forward functions (``ppo.models.forward``); its parameters'
    gradients land in DDP's contiguous buffers.
    """

    def __init__(self, model: torch.nn.Module, settings: OptimizerSettings):
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        distributed = settings.distributed_optimizer
        if distributed is None:
            distributed = torch.cuda.is_available()
        self.settings = settings
        self.module = model
        self.ddp = DistributedDataParallel(
            config=model.config,
            ddp_config=DistributedDataParallelConfig(
                grad_reduce_in_fp32=True, overlap_grad_reduce=False, use_distributed_optimizer=distributed
            ),
            module=model,
        )
        self.optimizer = get_megatron_optimizer(
            OptimizerConfig(
                optimizer="adam",
                lr=settings.lr,
                min_lr=settings.min_lr,
                weight_decay=settings.weight_decay,
                adam_beta1=settings.adam_beta1,
                adam_beta2=settings.adam_beta2,
                adam_eps=settings.adam_eps,
                clip_grad=settings.clip_grad,
                bf16=model.config.bf16,
                params_dtype=model.config.params_dtype,
                use_distributed_optimizer=distributed,
            ),
            [self.ddp],
        )
        self.steps_done = 0
        self.offloaded = False

    def _set_lr(self, lr: float | None = None) -> float:
        lr = learning_rate(self.settings, self.steps_done) if lr is None else lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def offload(self, keep_weights: bool = False) -> None:
        """Move parameters and optimizer state to host memory and free the gradients, so that a colocated vLLM
        engine can use the GPU memory; a no-op on CPU.  ``keep_weights``: the parameters stay (the refit still
        reads them; a later call without it moves them too).  ``onload`` undoes it (gradients come back zeroed)."""
        if not torch.cuda.is_available():
            return
        for buffer in self.ddp.buffers + self.ddp.expert_parallel_buffers:
            buffer.offload_to_cpu(move_params=not keep_weights, move_grads=True)  # each part moves once
        if not self.offloaded:
            self.optimizer.offload_to_cpu()
        torch.cuda.empty_cache()
        self.offloaded = True

    def onload(self) -> None:
        if not self.offloaded:
            return
        for buffer in self.ddp.buffers + self.ddp.expert_parallel_buffers:
            buffer.reload_from_cpu(move_params=True, move_grads=True)
        self.optimizer.restore_from_cpu()
        torch.cuda.synchronize()
        self.offloaded = False

    def reset_optimizer_state(self) -> None:
        """Forget Adam's moments (e.g. after a supervised warm start, before RL at a much smaller learning rate)."""
        for optimizer in getattr(self.optimizer, "chained_optimizers", [self.optimizer]):
            optimizer.optimizer.state.clear()
        self.steps_done = 0

    def step(
        self,
        microbatches: Sequence[dict],
        loss_fn: Callable[[torch.nn.Module, dict], tuple[torch.Tensor, dict]],
        *,
        lr: float | None = None,
    ) -> dict[str, float]:
        """Forward/backward every micro-batch, then one optimizer step; returns the reduced metrics.

        ``loss_fn(module, microbatch) -> (loss, metrics)`` must normalise by global counts; ``lr`` overrides the
        schedule for this step (the supervised warm start runs at its own rate).  A non-finite
        gradient norm skips the update (``skipped`` = 1 in the metrics) and leaves the parameters unchanged.
        """
        from megatron.core.distributed import finalize_model_grads

        self.ddp.train()
        self.ddp.zero_grad_buffer()
        self.optimizer.zero_grad()
        pieces = []
        for microbatch in microbatches:
            loss, metrics = loss_fn(self.module, microbatch)
            loss.backward()
            pieces.append(metrics)
        # Megatron's gradient finalisation: the data-parallel sum, plus (under sequence parallelism) the TP all-reduce
        # of the norms' gradients, which each rank computed from its slice of the sequence only
        finalize_model_grads([self.ddp])
        lr = self._set_lr(lr)
        grad_norm, skipped = self._clip_and_update()
        if not skipped:
            self.steps_done += 1
        reduced = reduce_metrics(_gather_over_data_parallel(pieces), over="microbatches")
        reduced.update({"grad_norm": grad_norm, "lr": lr, "skipped": float(skipped)})
        return reduced

    @torch.no_grad()
    def _clip_and_update(self) -> tuple[float, bool]:
        """Megatron's ``optimizer.step()`` split open so that a NaN/Inf gradient skips the update.

        (Megatron's own step only skips on overflow under fp16 loss scaling; in fp32/bf16 it would apply a NaN
        update.)  Returns the global gradient norm before clipping and whether the update was skipped.
        """
        from megatron.core.optimizer.clip_grads import clip_grad_by_total_norm_fp32

        found_inf = self.optimizer.prepare_grads()
        grad_norm = float("inf") if found_inf else float(self.optimizer.get_grad_norm())
        if not math.isfinite(grad_norm):
            return grad_norm, True
        if self.settings.clip_grad > 0:
            for optimizer in getattr(self.optimizer, "chained_optimizers", [self.optimizer]):
                parameters = optimizer.get_parameters()
                if parameters:
                    clip_grad_by_total_norm_fp32(parameters, max_norm=self.settings.clip_grad, total_norm=grad_norm)
        self.optimizer.step_with_ready_grads()
        return grad_norm, False


def _gather_over_data_parallel(pieces: list[dict]) -> list[dict]:
    """Every data-parallel rank's micro-batch metrics, so that each rank reduces the whole minibatch's (the pieces
    are normalised by global counts: summing them over ranks gives the full-batch values)."""
    from megatron.core import parallel_state

    if not torch.distributed.is_initialized() or parallel_state.get_data_parallel_world_size() == 1:
        return pieces
    plain = [{k: float(torch.as_tensor(v).detach().double().cpu()) for k, v in p.items()} for p in pieces]
    gathered: list = [None] * parallel_state.get_data_parallel_world_size()
    torch.distributed.all_gather_object(gathered, plain, group=parallel_state.get_data_parallel_group())
    return [p for rank in gathered for p in rank]
