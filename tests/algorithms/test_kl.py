import math

import pytest
import torch

from ppo.algorithms.kl import KLController, adaptive_kl_coef, kl_penalty
from tests.algorithms import reference as ref


@pytest.mark.parametrize("kind", ["k1", "k2", "k3", "k3+"])
def test_kl_equals_reference_including_clamps(kind):
    logp = torch.tensor([-1.0, -2.0, -0.1, -30.0, -0.5], dtype=torch.float64)
    logp_ref = torch.tensor([-1.5, -0.2, -0.1, -1.0, -25.0], dtype=torch.float64)
    expected = [ref.kl(a, b, kind) for a, b in zip(logp.tolist(), logp_ref.tolist())]
    torch.testing.assert_close(kl_penalty(logp, logp_ref, kind), torch.tensor(expected, dtype=torch.float64))


def test_k2_k3_non_negative_and_zero_at_equality():
    g = torch.Generator().manual_seed(0)
    logp, logp_ref = -torch.rand(1000, generator=g) * 5, -torch.rand(1000, generator=g) * 5
    for kind in ["k2", "k3", "k3+"]:
        assert (kl_penalty(logp, logp_ref, kind) >= 0).all()
        assert kl_penalty(logp, logp, kind).abs().max() == 0
    assert (kl_penalty(logp, logp_ref, "k1") < 0).any(), "k1 is unbiased only on average: per token it can be < 0"


def test_k3_plus_has_k3_value_and_k2_gradient():
    logp = torch.tensor([-1.0, -0.3, -2.0], requires_grad=True)
    logp_ref = torch.tensor([-0.5, -1.0, -2.5])
    value = kl_penalty(logp, logp_ref, "k3+")
    torch.testing.assert_close(value, kl_penalty(logp, logp_ref, "k3"))
    (grad_plus,) = torch.autograd.grad(value.sum(), logp)
    (grad_k2,) = torch.autograd.grad(kl_penalty(logp, logp_ref, "k2").sum(), logp)
    (grad_k3,) = torch.autograd.grad(kl_penalty(logp, logp_ref, "k3").sum(), logp)
    torch.testing.assert_close(grad_plus, grad_k2)
    assert not torch.allclose(grad_plus, grad_k3)


def test_k3_plus_keeps_the_k2_gradient_where_k3_is_clamped():
    """Tokens that drifted furthest (k3 ≥ the output clamp 10) still pull back: d(logr²/2)/d logp = −logr."""
    logp = torch.tensor([-4.0, -6.0, -0.5], dtype=torch.float64, requires_grad=True)
    logp_ref = torch.tensor([-1.0, -1.0, -1.0], dtype=torch.float64)  # logr = 3, 5, −0.5: k3 ≈ 16.1, 142.4, 0.107
    value = kl_penalty(logp, logp_ref, "k3+")
    torch.testing.assert_close(value.detach(), torch.tensor([10.0, 10.0, math.exp(-0.5) - 0.5], dtype=torch.float64))
    (grad,) = torch.autograd.grad(value.sum(), logp)
    torch.testing.assert_close(grad, -(logp_ref - logp).detach())


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")


def test_adaptive_controller():
    # KL at twice the target: error clipped to +0.2, β grows by 0.2·n/horizon
    assert adaptive_kl_coef(0.1, 0.2, target=0.1, horizon=100, n_steps=10) == pytest.approx(0.1 * 1.02)
    assert adaptive_kl_coef(0.1, 0.09, target=0.1, horizon=100, n_steps=10) == pytest.approx(0.1 * (1 - 0.01))
    fixed = KLController(0.05)
    assert fixed.update(10.0, 100) == 0.05
    adaptive = KLController(0.05, target=0.01, horizon=10)
    adaptive.update(1.0, 10)
    assert adaptive.coef == pytest.approx(0.06)
    restored = KLController(1.0, target=0.01)
    restored.load_state_dict(adaptive.state_dict())
    assert math.isclose(restored.coef, adaptive.coef)
