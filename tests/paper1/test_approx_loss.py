"""The approximate loss (4.1): against a plain loop, autograd, the symmetric reduction, minimisers."""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from icl_lib.paper1.approx_loss import (
    ApproxLossConfig,
    approx_loss,
    approx_loss_grad,
    loss_star,
    mu_star,
    s_star,
    two_head_loss,
    two_head_vector_field,
    valley_s,
)
from icl_lib.estimators import optimal_eta_debiased

CONFIGS = [ApproxLossConfig(5, 40, 0.1), ApproxLossConfig(10, 40, 0.1), ApproxLossConfig(3, 7, 0.0)]


def loop_loss(mu, omega, d, L, s2):
    """(4.1) written term by term with Python floats."""
    H = len(mu)
    total = 1 + s2 - 2 * sum(mu[h] * omega[h] for h in range(H))
    for i in range(H):
        for j in range(H):
            total += mu[i] * mu[j] * (omega[i] * omega[j] + (1 + s2) / L * math.exp(d * omega[i] * omega[j]))
    return total


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("H", [1, 2, 4])
def test_loss_matches_plain_loop(cfg, H, gen):
    mu = torch.randn(3, H, generator=gen, dtype=torch.float64)
    omega = 0.4 * torch.randn(3, H, generator=gen, dtype=torch.float64)
    got = approx_loss(mu, omega, cfg)
    assert got.shape == (3,)
    for b in range(3):
        want = loop_loss(mu[b].tolist(), omega[b].tolist(), cfg.d, cfg.L, cfg.sigma2)
        assert abs(got[b].item() - want) < 1e-12 * max(1, abs(want))


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("H", [1, 2, 3, 4])
def test_gradient_matches_autograd(cfg, H, gen):
    mu = torch.randn(2, 5, H, generator=gen, dtype=torch.float64).requires_grad_()
    omega = (0.3 * torch.randn(2, 5, H, generator=gen, dtype=torch.float64)).requires_grad_()
    approx_loss(mu, omega, cfg).sum().backward()
    g_mu, g_omega = approx_loss_grad(mu.detach(), omega.detach(), cfg)
    assert torch.allclose(g_mu, mu.grad, rtol=1e-11, atol=1e-12)
    assert torch.allclose(g_omega, omega.grad, rtol=1e-11, atol=1e-12)
    # the numpy path computes the same numbers
    n_mu, n_omega = approx_loss_grad(mu.detach().numpy(), omega.detach().numpy(), cfg)
    assert isinstance(n_mu, np.ndarray)
    np.testing.assert_allclose(n_mu, mu.grad.numpy(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(n_omega, omega.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_broadcasting_of_mu_against_omega(gen):
    cfg = CONFIGS[0]
    mu = torch.randn(4, 2, generator=gen, dtype=torch.float64)
    omega = torch.tensor([0.3, -0.2], dtype=torch.float64)
    got = approx_loss(mu, omega, cfg)
    want = torch.stack([approx_loss(mu[b], omega, cfg) for b in range(4)])
    assert torch.allclose(got, want, rtol=0, atol=1e-14)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_symmetric_two_head_reduction(cfg):
    m = torch.tensor([0.0, 0.3, 1.7, 5.0, -0.8], dtype=torch.float64)
    w = torch.tensor([0.01, 0.5, 0.2, 0.05, 0.9], dtype=torch.float64)
    general = approx_loss(torch.stack([m, -m], -1), torch.stack([w, -w], -1), cfg)
    reduced = two_head_loss(m, w, cfg)
    assert torch.allclose(general, reduced, rtol=1e-13, atol=1e-13)
    # the spec's form in s = 2 m w
    s = 2 * m * w
    c = (1 + cfg.sigma2) / cfg.L
    spec = 1 + cfg.sigma2 - 2 * s + s**2 + c * s**2 * torch.sinh(cfg.d * w**2) / w**2
    assert torch.allclose(reduced, spec, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_two_head_vector_field_is_the_restricted_gradient_flow(cfg):
    m = torch.tensor([0.2, 1.5, 3.0], dtype=torch.float64)
    w = torch.tensor([0.1, 0.6, 0.05], dtype=torch.float64)
    dm, dw = two_head_vector_field(m, w, cfg)
    g_mu, g_omega = approx_loss_grad(torch.stack([m, -m], -1), torch.stack([w, -w], -1), cfg)
    assert torch.allclose(dm, -g_mu[:, 0], rtol=1e-12) and torch.allclose(-dm, -g_mu[:, 1], rtol=1e-12)
    assert torch.allclose(dw, -g_omega[:, 0], rtol=1e-12) and torch.allclose(-dw, -g_omega[:, 1], rtol=1e-12)
    # and equals -(1/2) grad of the reduced loss (autograd)
    mm, ww = m.clone().requires_grad_(), w.clone().requires_grad_()
    two_head_loss(mm, ww, cfg).sum().backward()
    assert torch.allclose(dm, -0.5 * mm.grad, rtol=1e-12) and torch.allclose(dw, -0.5 * ww.grad, rtol=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("H", [2, 3, 4])
def test_mu_star_minimises_in_mu(cfg, H, gen):
    omega = torch.linspace(-0.6, 0.5, H, dtype=torch.float64) + 0.05 * torch.rand(H, generator=gen, dtype=torch.float64)
    ms = mu_star(omega, cfg).requires_grad_()
    loss = approx_loss(ms, omega, cfg)
    loss.backward()
    assert ms.grad.abs().max() < 1e-9  # stationary in mu
    for _ in range(20):  # and a minimum: any perturbation increases the loss
        delta = 0.01 * torch.randn(H, generator=gen, dtype=torch.float64)
        assert approx_loss(ms.detach() + delta, omega, cfg) > loss.detach()


@pytest.mark.parametrize("cfg", CONFIGS)
def test_mu_star_symmetric_closed_form(cfg):
    c = (1 + cfg.sigma2) / cfg.L
    for w in (0.02, 0.3, 0.8):
        got = mu_star(torch.tensor([w, -w], dtype=torch.float64), cfg)
        m = w / (2 * w**2 + 2 * c * math.sinh(cfg.d * w**2))
        assert torch.allclose(got, torch.tensor([m, -m], dtype=torch.float64), rtol=1e-10)
        assert abs(valley_s(w, cfg).item() - 2 * m * w) < 1e-12


@pytest.mark.parametrize("cfg", CONFIGS)
def test_s_star_is_the_infimum_of_the_reduced_loss(cfg):
    # minimise the reduced loss over m numerically (no closed form used) for shrinking w
    values = []
    for w in (0.5, 0.2, 0.1, 0.03, 0.01):
        res = minimize_scalar(lambda m: two_head_loss(m, w, cfg).item(), bracket=(0.0, 1 / w), tol=1e-12)
        values.append(res.fun)
        assert res.fun > loss_star(cfg) - 1e-12  # never below the infimum
        assert abs(2 * res.x * w - valley_s(w, cfg).item()) < 1e-5
    assert all(a > b for a, b in zip(values, values[1:]))  # the loss decreases along the valley
    assert values[-1] - loss_star(cfg) < 1e-6  # and approaches 1 + sigma2 - s*
    assert abs(s_star(cfg) - 1 / (1 + (1 + cfg.sigma2) * cfg.d / cfg.L)) < 1e-15


def test_s_star_equals_optimal_debiased_gd_step():
    """Theorem 4.2 (ii): the minimiser of (4.1) is the best debiased GD step (independent code)."""
    for d, L, s2 in [(5, 40, 0.1), (10, 40, 0.1), (3, 9, 0.5)]:
        assert abs(s_star(ApproxLossConfig(d, L, s2)) - optimal_eta_debiased(d, L, s2)) < 1e-14
    assert abs(ApproxLossConfig().s_star - 0.8791) < 1e-4


@pytest.mark.parametrize(
    "kwargs, name",
    [({"d": 0}, "d"), ({"L": 0}, "L"), ({"sigma2": -0.1}, "sigma2"), ({"d": 2.5}, "d"), ({"sigma2": float("nan")}, "sigma2")],
)
def test_config_validation(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}=.* is invalid: accepted"):
        ApproxLossConfig(**kwargs)


def test_shape_and_type_validation():
    cfg = ApproxLossConfig()
    with pytest.raises(ValueError, match=r"^mu.shape=\(3,\) is invalid: accepted"):
        approx_loss(torch.zeros(3), torch.zeros(2), cfg)
    with pytest.raises(ValueError, match=r"^mu.shape=\(3,\) is invalid: accepted"):
        approx_loss_grad(np.zeros(3), np.zeros(2), cfg)
    with pytest.raises(ValueError, match="is invalid: accepted"):
        approx_loss_grad(torch.zeros(2), torch.zeros(2), {"d": 5})
    with pytest.raises(torch.linalg.LinAlgError):  # A(omega) is singular when two omega_h coincide
        mu_star(torch.zeros(2, dtype=torch.float64), cfg)
