"""Generalised Advantage Estimation with carry-forward masking, as one compiled pass.

The recurrence (docs/ppo.md, section 4), run backwards over the tokens of each row with ``nextV = 0`` and ``A = 0``::

    δ_t   = r_t + γ·nextV − V_t
    A_new = δ_t + γ·λ·A
    if m_t:  nextV, A = V_t, A_new        # a trainable token updates the accumulators
    else:    (carried over unchanged)     # prompt, padding or environment tokens are skipped
    adv_t = A;  returns_t = A + V_t

Skipping masked tokens makes the result on trainable tokens independent of whatever sits in an interior gap
(multi-turn rollouts interleave environment turns), and the bootstrap past the last token is ``nextV = 0``.

Hand-worked example (γ = 1, λ = 1, one row of three trainable tokens, reward 1 on the last one)::

    r = [0, 0, 1],  V = [0.5, 0.25, 0.75]
    t=2: δ = 1 + 0 − 0.75 = 0.25,   A = 0.25            returns = 1.0
    t=1: δ = 0 + 0.75 − 0.25 = 0.5, A = 0.5 + 0.25 = 0.75  returns = 1.0
    t=0: δ = 0 + 0.25 − 0.5 = −0.25, A = −0.25 + 0.75 = 0.5 returns = 1.0

(with γ = λ = 1 every return equals the reward-to-go, here 1.)

The reference frameworks run this as a Python loop of small tensor ops per time step, which is slow on CPU and
launch-bound on GPU at long responses.  Here each row is one sequential scan compiled by numba, and rows run in
parallel; ``bench/gae.py`` measures the gain against that loop (``compute_gae_loop``).
"""

from __future__ import annotations

import numba
import numpy as np
import torch


@numba.njit(parallel=True, cache=True)
def _gae_scan(rewards, values, mask, gamma, lam, advantages, returns):  # pragma: no cover - compiled
    batch, length = rewards.shape
    for b in numba.prange(batch):
        gamma_lam = gamma * lam[b]
        next_value = 0.0  # float64 accumulators whatever the input dtype
        advantage = 0.0
        for t in range(length - 1, -1, -1):
            if mask[b, t]:
                value = float(values[b, t])
                delta = rewards[b, t] + gamma * next_value - value
                advantage = delta + gamma_lam * advantage
                next_value = value
                advantages[b, t] = advantage
                returns[b, t] = advantage + value
            else:
                advantages[b, t] = 0.0
                returns[b, t] = 0.0


def _check_shapes(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> None:
    if rewards.dim() != 2 or rewards.shape != values.shape or rewards.shape != mask.shape:
        raise ValueError(
            f"compute_gae expects [B, T] tensors of one shape; got rewards {tuple(rewards.shape)}, "
            f"values {tuple(values.shape)}, mask {tuple(mask.shape)}"
        )


def per_sample_lambda(lam: float | torch.Tensor, batch: int) -> torch.Tensor:
    """``lam`` as a float64 ``[B]`` tensor on the CPU (a float is broadcast)."""
    lam_t = torch.as_tensor(lam, dtype=torch.float64).detach().cpu()
    if lam_t.dim() == 0:
        return lam_t.expand(batch).contiguous()
    if lam_t.shape != (batch,):
        raise ValueError(f"lam must be a float or a [B]={batch} tensor; got shape {tuple(lam_t.shape)}")
    return lam_t


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    lam: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns ``[B, T]`` by GAE with carry-forward masking.

    Args:
        rewards: per-token rewards ``r_t`` (scalar reward already placed on the last trainable token).
        values: ``V_t``, the value of the state before token ``t``.
        mask: 1 on trainable tokens.  Masked positions are skipped by the recurrence.
        gamma: discount γ.
        lam: λ, a float or a ``[B]`` tensor (per-sample λ, e.g. ``length_adaptive_lambda``).

    Returns:
        ``(advantages, returns)``, both zero on masked positions, in ``rewards``' dtype and device.
        No gradient flows through them (GAE targets are constants for the losses).

    The scan accumulates in float64 (inputs are read as float32, or float64 if given); CUDA inputs are copied
    to the CPU for the scan and back.
    """
    _check_shapes(rewards, values, mask)
    scan_dtype = torch.float64 if rewards.dtype == torch.float64 else torch.float32
    as_array = lambda x: x.detach().to("cpu", scan_dtype).contiguous().numpy()  # noqa: E731
    rewards_np = as_array(rewards)
    advantages = np.empty_like(rewards_np)
    returns = np.empty_like(rewards_np)
    _gae_scan(
        rewards_np,
        as_array(values),
        mask.detach().cpu().bool().contiguous().numpy(),
        float(gamma),
        per_sample_lambda(lam, rewards.shape[0]).numpy(),
        advantages,
        returns,
    )
    to_input = lambda a: torch.from_numpy(a).to(rewards.device, rewards.dtype)  # noqa: E731
    return to_input(advantages), to_input(returns)


def compute_gae_loop(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    lam: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same GAE as a per-time-step loop of tensor ops, the way the reference frameworks write it.

    Kept as the readable baseline for ``bench/gae.py`` and the equality tests; use ``compute_gae``.
    """
    _check_shapes(rewards, values, mask)
    batch, length = rewards.shape
    lam_b = per_sample_lambda(lam, batch).to(rewards.device, rewards.dtype)
    m = mask.to(rewards.dtype)
    next_value = torch.zeros(batch, dtype=rewards.dtype, device=rewards.device)
    advantage = torch.zeros_like(next_value)
    advantages = torch.zeros_like(rewards)
    for t in reversed(range(length)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        new_advantage = delta + gamma * lam_b * advantage
        next_value = torch.where(mask[:, t].bool(), values[:, t], next_value)
        advantage = torch.where(mask[:, t].bool(), new_advantage, advantage)
        advantages[:, t] = advantage
    return advantages * m, (advantages + values) * m


def length_adaptive_lambda(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """VAPO's per-sample λ: ``clamp(1 − 1/clamp(α·l, min=1), 0, 1)`` for response lengths ``l`` ``[B]``.

    Longer responses get a λ closer to 1 (less bias where the reward is far away); α = 0.05 gives
    λ = 0 up to 20 tokens, 0.5 at 40, 0.99 at 2000.
    """
    if alpha <= 0:
        raise ValueError(f"length_adaptive_alpha must be > 0, got {alpha}")
    scaled = (alpha * lengths.to(torch.float64)).clamp(min=1.0)
    return (1.0 - 1.0 / scaled).clamp(0.0, 1.0)
