import math

import pytest
import torch

from ppo.algorithms.critic_loss import value_loss
from ppo.algorithms.options import PolicyLoss
from ppo.algorithms.policy_loss import clipped_pg_loss
from ppo.algorithms.reduction import reduce_metrics
from tests.algorithms import reference as ref

SPLITS = [[0, 6], [0, 1, 6], [0, 2, 3, 6], [0, 1, 2, 3, 4, 5, 6]]


def pg_args(batch, **kw):
    args = {k: batch[k] for k in ("logprobs", "old_logprobs", "advantages", "mask")}
    return {**args, **kw}


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
@pytest.mark.parametrize("clip_low,clip_high,dual_c", [(0.2, 0.2, None), (0.2, 0.28, 3.0), (0.1, 0.5, 10.0)])
def test_pg_loss_equals_reference(batch, aggregation, clip_low, clip_high, dual_c):
    loss, _ = clipped_pg_loss(
        **pg_args(batch), settings=PolicyLoss(clip_low=clip_low, clip_high=clip_high, dual_clip_c=dual_c,
                                              aggregation=aggregation)
    )
    lp, lo, adv, m = (ref.to_lists(batch[k]) for k in ("logprobs", "old_logprobs", "advantages", "mask"))
    expected = ref.pg_loss(lp, lo, adv, m, clip_low, clip_high, dual_c, aggregation)
    assert loss.item() == pytest.approx(expected, rel=1e-12)


def test_default_token_level_loss_is_masked_mean(batch):
    loss, _ = clipped_pg_loss(**pg_args(batch))
    ratio = torch.exp(batch["logprobs"] - batch["old_logprobs"])
    per_token = torch.maximum(-batch["advantages"] * ratio, -batch["advantages"] * ratio.clamp(0.8, 1.2))
    m = batch["mask"]
    assert loss.item() == pytest.approx(((per_token * m).sum() / m.sum()).item(), rel=1e-12)


def test_hand_worked_dual_clip():
    one = lambda x: torch.tensor([[x]], dtype=torch.float64)  # noqa: E731
    loss, metrics = clipped_pg_loss(one(math.log(5.0)), one(0.0), one(-1.0), one(1.0), PolicyLoss(dual_clip_c=3.0))
    assert loss.item() == pytest.approx(3.0)
    assert metrics["dual_clipfrac"].item() == 1.0
    _, metrics = clipped_pg_loss(one(math.log(2.0)), one(0.0), one(-1.0), one(1.0), PolicyLoss(dual_clip_c=3.0))
    assert metrics["dual_clipfrac"].item() == 0.0, "ratio 2 < c = 3: the dual clip does not bind"
    loss, _ = clipped_pg_loss(one(math.log(5.0)), one(0.0), one(-1.0), one(1.0))
    assert loss.item() == pytest.approx(5.0)
    loss, _ = clipped_pg_loss(one(math.log(5.0)), one(0.0), one(1.0), one(1.0), PolicyLoss(clip_high=0.28))
    assert loss.item() == pytest.approx(-1.28)


def test_dual_clip_only_ever_lowers_the_loss_and_only_for_negative_advantages(batch):
    args = pg_args(batch, advantages=batch["advantages"] * 5)
    args["logprobs"] = batch["logprobs"] * 3  # large ratios so the dual clip binds
    for sign in (-1, 1):
        adv = args["advantages"].abs() * sign
        base, _ = clipped_pg_loss(**dict(args, advantages=adv))
        dual, _ = clipped_pg_loss(**dict(args, advantages=adv), settings=PolicyLoss(dual_clip_c=1.5))
        if sign < 0:
            assert dual.item() < base.item()
        else:
            assert dual.item() == base.item()


@pytest.mark.parametrize("kind", ["is", "tis", "icepop", "seq-mask-tis"])
def test_importance_sampling_correction_equals_reference(batch, kind):
    cap, low = 1.5, 0.7
    loss, metrics = clipped_pg_loss(
        **pg_args(batch), settings=PolicyLoss(is_correction=kind, is_cap=cap, is_low=low),
        generation_logprobs=batch["gen_logprobs"],
    )
    lp, lo, lg, adv, m = (ref.to_lists(batch[k]) for k in ("logprobs", "old_logprobs", "gen_logprobs",
                                                               "advantages", "mask"))
    weights, oob = [], []
    for b in range(len(lp)):
        w_row = [math.exp(lo[b][t] - lg[b][t]) for t in range(len(lp[b]))]
        n_b = sum(m[b])
        seq = math.exp(sum((lo[b][t] - lg[b][t]) * m[b][t] for t in range(len(m[b]))) / n_b) if n_b else 1.0
        if kind == "tis":
            oob.append([w > cap for w in w_row])
            w_row = [min(w, cap) for w in w_row]
        elif kind == "icepop":
            oob.append([not low <= w <= cap for w in w_row])
            w_row = [w if low <= w <= cap else 0.0 for w in w_row]
        elif kind == "seq-mask-tis":
            keep = low <= seq <= cap
            oob.append([not keep] * len(w_row))
            w_row = [w * keep for w in w_row]
        else:
            oob.append([False] * len(w_row))
        weights.append(w_row)
    expected = ref.pg_loss(lp, lo, adv, m, 0.2, 0.2, None, "token", weights)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    n = sum(map(sum, m))
    assert metrics["is_oob_ratio"].item() == pytest.approx(
        sum(o * mm for orow, mrow in zip(oob, m) for o, mm in zip(orow, mrow)) / n
    )
    tmpe = sum(math.exp(abs(lg[b][t] - lo[b][t])) * m[b][t] for b in range(len(m)) for t in range(len(m[b]))) / n
    assert metrics["token_mult_prob_error"].item() == pytest.approx(tmpe)


def test_kl_term_and_positive_nll(batch):
    kw = dict(ref_logprobs=batch["ref_logprobs"], settings=PolicyLoss(kl_coef=0.1, kl_kind="k3", nll_coef=0.5),
              sequence_rewards=batch["sequence_rewards"])
    loss, metrics = clipped_pg_loss(**pg_args(batch), **kw)
    lp, lr, m = (ref.to_lists(batch[k]) for k in ("logprobs", "ref_logprobs", "mask"))
    R = batch["sequence_rewards"].tolist()
    n = sum(map(sum, m))
    kl = sum(ref.kl(lp[b][t], lr[b][t], "k3") * m[b][t] for b in range(len(m)) for t in range(len(m[b]))) / n
    pos = [(b, t) for b in range(len(m)) for t in range(len(m[b])) if m[b][t] and R[b] > 0]
    nll = sum(-lp[b][t] for b, t in pos) / len(pos)
    pg = ref.pg_loss(lp, ref.to_lists(batch["old_logprobs"]), ref.to_lists(batch["advantages"]), m, 0.2, 0.2, None)
    assert loss.item() == pytest.approx(pg + 0.1 * kl + 0.5 * nll, rel=1e-12)
    assert metrics["kl_penalty"].item() == pytest.approx(0.1 * kl)
    assert metrics["positive_nll_loss"].item() == pytest.approx(nll)


def test_kl_on_policy_approximation_weights(batch):
    kw = dict(ref_logprobs=batch["ref_logprobs"], generation_logprobs=batch["gen_logprobs"])
    plain, _ = clipped_pg_loss(**pg_args(batch), **kw, settings=PolicyLoss(kl_coef=1.0))
    approx, _ = clipped_pg_loss(**pg_args(batch), **kw, settings=PolicyLoss(kl_coef=1.0, kl_on_policy_approx=True))
    lp, lr, lg, m = (ref.to_lists(batch[k]) for k in ("logprobs", "ref_logprobs", "gen_logprobs", "mask"))
    n = sum(map(sum, m))
    w_kl = sum(math.exp(lp[b][t] - lg[b][t]) * ref.kl(lp[b][t], lr[b][t], "k3") * m[b][t]
               for b in range(len(m)) for t in range(len(m[b]))) / n
    kl = sum(ref.kl(lp[b][t], lr[b][t], "k3") * m[b][t] for b in range(len(m)) for t in range(len(m[b]))) / n
    assert (approx - plain).item() == pytest.approx(w_kl - kl, rel=1e-10)


def split_sum(fn, batch, bounds, keys, global_kwargs, **kw):
    """Sum of per-micro-batch losses (with global counts) and their reduced metrics; also the summed gradient."""
    leaf = batch[keys[0]].clone().requires_grad_(True)
    total, pieces = 0.0, []
    for lo, hi in zip(bounds, bounds[1:]):
        args = [leaf[lo:hi]] + [batch[k][lo:hi] for k in keys[1:]]
        extra = {k: (v[lo:hi] if torch.is_tensor(v) and v.shape[:1] == leaf.shape[:1] else v) for k, v in kw.items()}
        loss, metrics = fn(*args, **global_kwargs, **extra)
        total = total + loss
        pieces.append(metrics)
    (grad,) = torch.autograd.grad(total, leaf)
    return total.detach(), grad, reduce_metrics(pieces, over="microbatches")


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_pg_loss_and_gradient_are_microbatch_split_invariant(batch, aggregation):
    m = batch["mask"]
    global_kwargs = dict(global_valid_toks=m.sum(), global_valid_seqs=(m.sum(-1) > 0).sum(),
                         global_positive_toks=(m * (batch["sequence_rewards"] > 0)[:, None]).sum())
    keys = ["logprobs", "old_logprobs", "advantages", "mask"]
    kw = dict(settings=PolicyLoss(aggregation=aggregation, dual_clip_c=3.0, is_correction="tis", kl_coef=0.05,
                                  nll_coef=0.1),
              generation_logprobs=batch["gen_logprobs"], ref_logprobs=batch["ref_logprobs"],
              sequence_rewards=batch["sequence_rewards"])
    results = [split_sum(clipped_pg_loss, batch, bounds, keys, global_kwargs, **kw) for bounds in SPLITS]
    full_loss, full_grad, full_metrics = results[0]
    for loss, grad, metrics in results[1:]:
        torch.testing.assert_close(loss, full_loss, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad, full_grad, rtol=1e-12, atol=1e-12)
        for key, value in full_metrics.items():
            assert metrics[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_per_microbatch_normalisation_would_differ(batch):
    """The invariance test above can fail: dividing each micro-batch by its own count gives another loss."""
    keys = ["logprobs", "old_logprobs", "advantages", "mask"]
    full, _, _ = split_sum(clipped_pg_loss, batch, [0, 6], keys, {})
    local = [split_sum(clipped_pg_loss, batch, bounds, keys, {})[0] for bounds in SPLITS[1:]]
    assert any(abs(x.item() - full.item()) > 1e-3 for x in local)


@pytest.mark.parametrize("clip", [None, 0.2, 0.5])
def test_value_loss_equals_reference(batch, clip):
    loss, metrics = value_loss(batch["values"], batch["old_values"], batch["returns"], batch["mask"],
                               clip_range=clip, scale=0.4)
    v, vo, r, m = (ref.to_lists(batch[k]) for k in ("values", "old_values", "returns", "mask"))
    expected_loss, clipfrac = ref.value_loss(v, vo, r, m, clip, 0.4)
    assert loss.item() == pytest.approx(expected_loss, rel=1e-12)
    assert metrics["vf_clipfrac"].item() == pytest.approx(clipfrac)
    assert metrics["explained_var"].item() == pytest.approx(ref.explained_variance(v, r, m), rel=1e-9)


def test_value_loss_hand_worked():
    one = lambda x: torch.tensor([[x]], dtype=torch.float64)  # noqa: E731
    loss, metrics = value_loss(one(1.0), one(0.0), one(1.0), one(1.0), clip_range=0.2, scale=1.0)
    assert loss.item() == pytest.approx(0.32)
    assert metrics["vf_clipfrac"].item() == 1.0


def test_value_loss_gradient_and_explained_variance_are_split_invariant(batch):
    global_kwargs = dict(global_valid_toks=batch["mask"].sum())
    keys = ["values", "old_values", "returns", "mask"]
    results = [split_sum(value_loss, batch, b, keys, global_kwargs, clip_range=0.3, scale=0.5) for b in SPLITS]
    full_loss, full_grad, full_metrics = results[0]
    for loss, grad, metrics in results[1:]:
        torch.testing.assert_close(loss, full_loss, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad, full_grad, rtol=1e-12, atol=1e-12)
        for key in ("loss", "vf_clipfrac", "explained_var", "values_min", "values_max", "returns_mean"):
            assert metrics[key] == pytest.approx(full_metrics[key], rel=1e-9), key


def test_option_errors():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="dual_clip_c must be > 1"):
        clipped_pg_loss(x, x, x, x, PolicyLoss(dual_clip_c=0.5))
    with pytest.raises(ValueError, match="is_correction"):
        clipped_pg_loss(x, x, x, x, PolicyLoss(is_correction="tiss"))
    with pytest.raises(ValueError, match="needs ref_logprobs"):
        clipped_pg_loss(x, x, x, x, PolicyLoss(kl_coef=0.1))
    with pytest.raises(ValueError, match="clip_range"):
        value_loss(x, x, x, x, clip_range=0.0)
