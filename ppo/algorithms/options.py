"""The policy loss's settings, their allowed values and their check, without torch.

The loss function checks its settings on every call; an experiment checks the same settings once, before anything
is launched (:meth:`ppo.experiment.Experiment.check`), which is why they live apart from the tensor code.
"""

from __future__ import annotations

from dataclasses import dataclass

IS_CORRECTIONS = (None, "is", "tis", "icepop", "seq-mask-tis")
AGGREGATIONS = ("token", "sequence")
KL_KINDS = ("k1", "k2", "k3", "k3+")


@dataclass(frozen=True)
class PolicyLoss:
    """The actor's loss settings (:func:`ppo.algorithms.policy_loss.clipped_pg_loss`; formulas in ``docs/ppo.md``).

    An experiment configures it as ``policy.loss`` (``ppo.workers.specs`` exports it too, where the configs of runs
    before it moved here name it).
    """

    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip_c: float | None = None
    aggregation: str = "token"
    ratio_level: str = "token"
    is_correction: str | None = None
    is_cap: float = 2.0
    is_low: float = 0.5
    kl_coef: float = 0.0  # KL to the reference policy as a loss term (0 = off, no reference model loaded)
    kl_kind: str = "k3"
    kl_on_policy_approx: bool = False
    nll_coef: float = 0.0  # VAPO positive-example NLL

    def check(self) -> None:
        """Raise ``ValueError`` (one line naming the setting) for a setting the loss cannot use."""
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.ratio_level not in ("token", "sequence"):
            raise ValueError(f"ratio_level must be 'token' or 'sequence' (GSPO), got {self.ratio_level!r}")
        if self.is_correction not in IS_CORRECTIONS:
            raise ValueError(f"is_correction must be one of {IS_CORRECTIONS}, got {self.is_correction!r}")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            raise ValueError(f"clip ranges need 0 <= clip_low < 1 and clip_high >= 0, got {self.clip_low}, "
                             f"{self.clip_high}")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError(f"dual_clip_c must be > 1 (or None to disable), got {self.dual_clip_c}")
