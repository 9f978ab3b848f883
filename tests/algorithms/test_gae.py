import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ppo.algorithms.gae import compute_gae, compute_gae_loop, length_adaptive_lambda
from tests.algorithms import reference as ref


@pytest.mark.parametrize("impl", [compute_gae, compute_gae_loop])
@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.99, 0.95), (0.9, 0.0), (1.0, "per-sample")])
def test_gae_matches_float64_loop(batch, impl, gamma, lam):
    B = batch["rewards"].shape[0]
    lam_arg = torch.linspace(0.0, 1.0, B, dtype=torch.float64) if lam == "per-sample" else lam
    lams = lam_arg.tolist() if lam == "per-sample" else [lam] * B
    adv, ret = impl(batch["rewards"], batch["values"], batch["mask"], gamma=gamma, lam=lam_arg)
    adv_ref, ret_ref = ref.gae(*(ref.to_lists(batch[k]) for k in ("rewards", "values", "mask")), gamma, lams)
    torch.testing.assert_close(adv, torch.tensor(adv_ref, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ret, torch.tensor(ret_ref, dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_hand_worked_example():
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.25, 0.75]])
    adv, ret = compute_gae(r, v, torch.ones(1, 3), gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv, torch.tensor([[0.5, 0.75, 0.25]]))
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 1.0]]))
    # γ = 0.5, λ = 0.5 by hand: δ2 = 1 − 0.75 = 0.25, δ1 = 0.5·0.75 − 0.25 = 0.125, δ0 = 0.5·0.25 − 0.5 = −0.375;
    # A2 = 0.25, A1 = 0.125 + 0.25·0.25 = 0.1875, A0 = −0.375 + 0.25·0.1875 = −0.328125
    adv, _ = compute_gae(r, v, torch.ones(1, 3), gamma=0.5, lam=0.5)
    torch.testing.assert_close(adv, torch.tensor([[-0.328125, 0.1875, 0.25]]))


def test_float32_fast_path_equals_loop_within_1e_5():
    g = torch.Generator().manual_seed(0)
    r, v = torch.randn(8, 1024, generator=g), torch.randn(8, 1024, generator=g)
    mask = (torch.rand(8, 1024, generator=g) > 0.2).float()
    fast = compute_gae(r, v, mask, gamma=1.0, lam=0.95)
    exact = compute_gae_loop(r.double(), v.double(), mask.double(), gamma=1.0, lam=0.95)
    for a, b in zip(fast, exact):
        assert a.dtype == torch.float32
        assert ((a.double() - b).abs().max() / b.abs().max()).item() < 1e-5


def test_lambda_one_gamma_one_is_return_to_go_minus_value(batch):
    adv, ret = compute_gae(batch["rewards"], batch["values"], batch["mask"], gamma=1.0, lam=1.0)
    rtg = torch.tensor(ref.return_to_go(ref.to_lists(batch["rewards"]), ref.to_lists(batch["mask"]), 1.0))
    torch.testing.assert_close(ret, rtg.double() * batch["mask"])
    torch.testing.assert_close(adv, (rtg.double() - batch["values"]) * batch["mask"])


@settings(max_examples=60, deadline=None)
@given(
    n_before=st.integers(1, 6),
    n_gap=st.integers(1, 5),
    n_after=st.integers(1, 6),
    gamma=st.floats(0.5, 1.0),
    lam=st.floats(0.0, 1.0),
    gap_value=st.sampled_from([999.0, -1e6, float("nan")]),
    seed=st.integers(0, 2**16),
)
def test_masked_gap_invariance(n_before, n_gap, n_after, gamma, lam, gap_value, seed):
    """An interior masked gap (with any values and rewards in it) changes nothing on the trainable tokens."""
    g = torch.Generator().manual_seed(seed)
    n = n_before + n_after
    r, v = torch.randn(1, n, generator=g, dtype=torch.float64), torch.randn(1, n, generator=g, dtype=torch.float64)
    collapsed_adv, collapsed_ret = compute_gae(r, v, torch.ones(1, n), gamma=gamma, lam=lam)

    gap = torch.full((1, n_gap), gap_value, dtype=torch.float64)
    r_gap = torch.cat([r[:, :n_before], gap, r[:, n_before:]], dim=1)
    v_gap = torch.cat([v[:, :n_before], gap, v[:, n_before:]], dim=1)
    m_gap = torch.cat([torch.ones(1, n_before), torch.zeros(1, n_gap), torch.ones(1, n_after)], dim=1)
    adv, ret = compute_gae(r_gap, v_gap, m_gap, gamma=gamma, lam=lam)
    keep = m_gap.bool()[0]
    torch.testing.assert_close(adv[:, keep], collapsed_adv)
    torch.testing.assert_close(ret[:, keep], collapsed_ret)
    assert (adv[:, ~keep] == 0).all()


def test_trailing_padding_bootstraps_zero():
    """Values on padding after the response must not be bootstrapped from (nextV = 0 past the end)."""
    r = torch.tensor([[0.0, 1.0, 0.0, 0.0]])
    v = torch.tensor([[0.1, 0.2, 50.0, 50.0]])
    m = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    adv, ret = compute_gae(r, v, m, gamma=1.0, lam=1.0)
    torch.testing.assert_close(ret, torch.tensor([[1.0, 1.0, 0.0, 0.0]]))


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="expects \\[B, T\\] tensors"):
        compute_gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3), gamma=1.0, lam=1.0)
    with pytest.raises(ValueError, match="lam must be a float or a \\[B\\]=2 tensor"):
        compute_gae(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3), gamma=1.0, lam=torch.ones(3))


def test_length_adaptive_lambda_formula():
    lengths = torch.tensor([0, 1, 10, 20, 21, 40, 2000])
    lam = length_adaptive_lambda(lengths, 0.05)
    expected = [max(0.0, min(1.0, 1 - 1 / max(0.05 * n, 1.0))) for n in lengths.tolist()]
    torch.testing.assert_close(lam, torch.tensor(expected, dtype=torch.float64))
    assert lam[5].item() == pytest.approx(0.5) and lam[6].item() == pytest.approx(0.99)
    with pytest.raises(ValueError):
        length_adaptive_lambda(lengths, 0.0)
