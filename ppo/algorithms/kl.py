"""KL estimators between the policy and a reference policy, per token, and the adaptive KL coefficient.

With ``logr = logp_ref − logp`` (clamped to ±``input_clamp``; samples come from the policy):

- ``k1 = −logr``                 unbiased, can be negative per token
- ``k2 = logr²/2``               biased, low variance, ≥ 0; its gradient is the right one for a KL loss
- ``k3 = exp(logr) − 1 − logr``  unbiased, ≥ 0 (Schulman's estimator), but a biased gradient
- ``k3+``                        straight-through: the value of k3 with the gradient of k2

The value is clamped to ±``output_clamp``; k3+'s gradient (k2's) is never clamped away.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppo.algorithms.options import KL_KINDS


def kl_penalty(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    kind: str = "k3",
    input_clamp: float | None = 20.0,
    output_clamp: float | None = 10.0,
) -> torch.Tensor:
    """Per-token KL estimate of ``KL(π ‖ π_ref)``, same shape as the inputs."""
    log_ratio = ref_logprobs - logprobs
    if input_clamp is not None:
        log_ratio = log_ratio.clamp(-input_clamp, input_clamp)
    if kind == "k1":
        kl = -log_ratio
    elif kind == "k2":
        kl = 0.5 * log_ratio.square()
    elif kind in ("k3", "k3+"):
        kl = torch.expm1(log_ratio) - log_ratio
    else:
        raise ValueError(f"unknown KL estimator {kind!r}; choose one of {', '.join(KL_KINDS)}")
    if output_clamp is not None:
        kl = kl.clamp(-output_clamp, output_clamp)
    if kind == "k3+":
        # only the value is clamped: clamping the joined estimate would zero k2's gradient on exactly the tokens
        # that drifted furthest (k3 ≥ output_clamp)
        k2 = 0.5 * log_ratio.square()
        kl = kl.detach() + (k2 - k2.detach())
    return kl


def adaptive_kl_coef(coef: float, kl: float, *, target: float, horizon: int, n_steps: int) -> float:
    """One update of the adaptive KL controller (Ziegler et al. 2019).

    ``err = clip(KL/target − 1, −0.2, 0.2)``; ``β ← β·(1 + err·n_steps/horizon)``: β grows while the measured KL
    is above target and shrinks below it, by at most 20 % per horizon.
    """
    error = min(max(kl / target - 1.0, -0.2), 0.2)
    return coef * (1.0 + error * n_steps / horizon)


@dataclass
class KLController:
    """The KL coefficient β the trainer uses; adaptive when ``target`` is set, fixed otherwise."""

    coef: float
    target: float | None = None
    horizon: int = 10_000

    def update(self, kl: float, n_steps: int) -> float:
        if self.target is not None:
            self.coef = adaptive_kl_coef(self.coef, kl, target=self.target, horizon=self.horizon, n_steps=n_steps)
        return self.coef

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict) -> None:
        self.coef = float(state["coef"])
