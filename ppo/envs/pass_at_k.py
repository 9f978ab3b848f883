"""pass@k over groups of samples drawn for the same prompt.

The naive estimate (did any of the first k samples pass?) has high variance and depends on sample order.  With n ≥ k
samples of which c pass, Chen et al. (2021, "Evaluating Large Language Models Trained on Code", eq. 1) give the
unbiased estimator ``1 - C(n-c, k) / C(n, k)``: the chance that a random k-subset of the n samples holds a pass.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with ``n`` samples of which ``c`` pass; requires ``1 <= k <= n``."""
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def grouped_pass_at_k(correct: Sequence[bool], group_ids: Sequence[Hashable], k: int) -> float | None:
    """Mean pass@k over the groups (prompts) with at least k samples; None when no group is that large.

    Groups smaller than k are left out rather than estimated with fewer samples, which would bias pass@k down.
    """
    if len(correct) != len(group_ids):
        raise ValueError(f"{len(correct)} results but {len(group_ids)} group ids")
    counts: dict[Hashable, list[int]] = {}
    for ok, group in zip(correct, group_ids):
        tally = counts.setdefault(group, [0, 0])
        tally[0] += 1
        tally[1] += bool(ok)
    estimates = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
    return sum(estimates) / len(estimates) if estimates else None
