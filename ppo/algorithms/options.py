"""The loss options' allowed values and their checks, without torch.

The loss functions check their options on every call; an experiment checks the same options once, before anything
is launched (:meth:`ppo.experiment.Experiment.validate`), which is why they live apart from the tensor code.
"""

from __future__ import annotations

IS_CORRECTIONS = (None, "is", "tis", "icepop", "seq-mask-tis")
AGGREGATIONS = ("token", "sequence")
KL_KINDS = ("k1", "k2", "k3", "k3+")


def check_loss_options(aggregation, ratio_level, is_correction, clip_low, clip_high, dual_clip_c) -> None:
    """Raise ``ValueError`` for a policy-loss option :func:`ppo.algorithms.clipped_pg_loss` cannot use."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if ratio_level not in ("token", "sequence"):
        raise ValueError(f"ratio_level must be 'token' or 'sequence' (GSPO), got {ratio_level!r}")
    if is_correction not in IS_CORRECTIONS:
        raise ValueError(f"is_correction must be one of {IS_CORRECTIONS}, got {is_correction!r}")
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(f"clip ranges need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if dual_clip_c is not None and dual_clip_c <= 1:
        raise ValueError(f"dual_clip_c must be > 1 (or None to disable), got {dual_clip_c}")
