"""Paper 2's losses (icl_lib.paper2.loss): identities against independent forms, gradients against autograd,
the population loss against Monte Carlo of E[L_hat]."""

import math

import pytest
import torch

from icl_lib.paper2.manifold import manifold_point
from icl_lib.paper2.monte_carlo import mc_loss
from icl_lib.paper2.data import P2Config, make_problem, sample
from icl_lib.paper2.loss import (
    Q_P_geometry,
    attention_mean,
    empirical_loss_grad,
    empirical_regulariser,
    excess_loss,
    population_grad,
    population_loss,
    population_Q,
    regulariser,
    regulariser_grad,
)

from icl_lib.paper2.loss import _CHUNK_ELEMENTS, empirical_Q

# the gradient oracle by autograd, the reference for the explicit gradients (tests only)
def empirical_grad(A, B, X, Y, regularised: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of the sequence-averaged ``Q_hat`` (or ``L_hat``) in ``(A, B)`` by autograd.

    This is the gradient oracle of paper 2, Section 3.1, with the expectation ``E[grad Q_hat]``
    replaced by the mean over the ``K`` fresh sequences in ``X (R, K, n, d)``, ``Y (R, K, n, p)``.
    Sequences are processed in chunks so that memory stays bounded at large ``n``.
    Returns ``(grad_A (R, p, d), grad_B (R, d, d))``.
    """
    R, K, n, _ = X.shape
    chunk = max(1, min(K, _CHUNK_ELEMENTS // max(1, R * n * n)))
    gA = torch.zeros_like(A)
    gB = torch.zeros_like(B)
    for k0 in range(0, K, chunk):
        Xc, Yc = X[:, k0 : k0 + chunk], Y[:, k0 : k0 + chunk]
        with torch.enable_grad():
            A_ = A.detach().requires_grad_(True)
            B_ = B.detach().requires_grad_(True)
            q = empirical_Q(A_, B_, Xc, Yc, regularised).sum() * (Xc.shape[1] / K)
            a, b = torch.autograd.grad(q, (A_, B_))
        gA += a
        gB += b
    return gA, gB


DT = torch.float64


def _theta(problem, gen, scale=0.4):
    A = scale * torch.randn(problem.R, problem.p, problem.d, generator=gen, dtype=DT)
    B = scale * torch.randn(problem.R, problem.d, problem.d, generator=gen, dtype=DT)
    return A, B


@pytest.fixture
def problem():
    return make_problem(P2Config(d=3, p=5, kappa=6.0, noise_std=0.1), R=3, seed=7)


def test_Q_equals_P_geometry_expression(problem, gen):
    """Q = L + R equals L* + 1/8 ||P^{1/2}(theta Sigma theta^T - 2 Sym(M)) P^{1/2}||^2 - 1/2 ||M Sigma^{1/2}||^2."""
    for _ in range(3):
        A, B = _theta(problem, gen)
        q = population_Q(A, B, problem.M, problem.Sigma, problem.noise_var)
        q_p = Q_P_geometry(A, B, problem.M, problem.Sigma, problem.noise_var)
        torch.testing.assert_close(q, q_p, rtol=1e-12, atol=1e-14)


def test_population_loss_and_regulariser_in_whitened_coordinates(problem, gen):
    """L and R against the whitened forms with an explicit Sigma^{1/2} (eigendecomposition here)."""
    A, B = _theta(problem, gen)
    w, V = torch.linalg.eigh(problem.Sigma)
    Sh = V @ torch.diag_embed(w.sqrt()) @ V.transpose(-1, -2)
    At, Bt = A @ Sh, Sh @ B @ Sh
    Mt = problem.M @ Sh
    L_w = 0.5 * (At @ Bt.transpose(-1, -2) - Mt).pow(2).sum((-1, -2)) + 0.5 * problem.noise_var
    R_w = 0.125 * (At.transpose(-1, -2) @ At - Bt.transpose(-1, -2) @ Bt).pow(2).sum((-1, -2))
    torch.testing.assert_close(population_loss(A, B, problem.M, problem.Sigma, problem.noise_var), L_w)
    torch.testing.assert_close(regulariser(A, B, problem.Sigma), R_w)


@pytest.mark.parametrize("regularised", [True, False])
def test_population_gradient_closed_form_vs_autograd(problem, gen, regularised):
    A, B = _theta(problem, gen)
    A_, B_ = A.clone().requires_grad_(True), B.clone().requires_grad_(True)
    q = population_Q(A_, B_, problem.M, problem.Sigma, problem.noise_var, regularised).sum()
    gA, gB = torch.autograd.grad(q, (A_, B_))
    cA, cB = population_grad(A, B, problem.M, problem.Sigma, regularised)
    torch.testing.assert_close(cA, gA, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(cB, gB, rtol=1e-10, atol=1e-13)


def test_attention_mean_against_a_plain_loop(problem, gen):
    """Each sample attends to all n samples of its sequence, itself included."""
    X, _ = sample(problem, 2, 5, gen)
    _, B = _theta(problem, gen)
    mu = attention_mean(X, B)
    for r in range(problem.R):
        for k in range(2):
            for i in range(5):
                s = torch.tensor([float(X[r, k, i] @ B[r] @ X[r, k, j]) for j in range(5)], dtype=DT)
                w = torch.exp(s - s.max())
                w = w / w.sum()
                ref = sum(w[j] * X[r, k, j] for j in range(5))
                torch.testing.assert_close(mu[r, k, i], ref)


def test_empirical_gradients_explicit_vs_autograd(problem, gen):
    A, B = _theta(problem, gen)
    X, Y = sample(problem, 6, 17, gen)
    aA, aB = empirical_grad(A, B, X, Y, regularised=False)
    eA, eB = empirical_loss_grad(A, B, X, Y)
    torch.testing.assert_close(eA, aA, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(eB, aB, rtol=1e-10, atol=1e-13)
    # the regulariser with each sequence's Sigma_hat, averaged over sequences
    A_, B_ = A.clone().requires_grad_(True), B.clone().requires_grad_(True)
    rA, rB = torch.autograd.grad(empirical_regulariser(A_, B_, X).sum(), (A_, B_))
    Sh = X.transpose(-1, -2) @ X / X.shape[-2]
    cA, cB = regulariser_grad(A, B, Sh)
    torch.testing.assert_close(cA, rA, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(cB, rB, rtol=1e-10, atol=1e-13)


def test_finite_n_loss_at_B_zero_matches_its_closed_form(problem, gen):
    """At B = 0 attention is uniform: E L_hat = L + (tr(A Sigma A^T) - 2 tr(A Sigma M^T)) / (2n) exactly."""
    A, _ = _theta(problem, gen, 0.3)
    B = torch.zeros(problem.R, problem.d, problem.d, dtype=DT)
    n = 7
    res = mc_loss(problem, A, B, n, 40_000, gen)
    S = problem.Sigma
    exact = res.L + (torch.einsum("rpd,rde,rpe->r", A, S, A) - 2 * torch.einsum("rpd,rde,rpe->r", A, S, problem.M)) / (2 * n)
    z = (res.L_hat - exact).abs() / res.L_hat_se
    assert z.max() < 4, (res.L_hat, exact, res.L_hat_se)
    # and the O(1/n) correction is resolved: it is many standard errors from 0
    assert ((exact - res.L).abs() / res.L_hat_se).min() > 10


def test_population_loss_is_the_large_n_limit_of_E_L_hat(gen):
    """Richardson extrapolation 2 E L_hat(2n) - E L_hat(n) removes the 1/n term and must match L."""
    pr = make_problem(P2Config(d=3, p=4, kappa=3.0, noise_std=0.01), R=2, seed=3)
    A, B = manifold_point(pr)
    A = A * 1.1
    B = B + 0.05 * torch.randn(B.shape, generator=gen, dtype=DT)
    lo = mc_loss(pr, A, B, 64, 2000, gen)
    hi = mc_loss(pr, A, B, 128, 2000, gen)
    rich = 2 * hi.L_hat - lo.L_hat
    se = (4 * hi.L_hat_se**2 + lo.L_hat_se**2).sqrt()
    assert ((rich - lo.L).abs() / se).max() < 4, (rich, lo.L, se)
    # the raw gap at n = 64 is positive and resolved (the formula is a limit, not an identity)
    assert ((lo.L_hat - lo.L) / lo.L_hat_se).min() > 5


def test_origin_is_not_stationary_at_finite_n(problem, gen):
    """E[grad_A L_hat(0, 0)] = -M Sigma / n: the saddle of L at theta = 0 moves by O(1/n)."""
    n, K = 9, 20_000
    A = torch.zeros(problem.R, problem.p, problem.d, dtype=DT)
    B = torch.zeros(problem.R, problem.d, problem.d, dtype=DT)
    X, Y = sample(problem, K, n, gen)
    # per-sequence gradients: grad_A = -(1/n) sum_i y_i xbar^T (uniform attention)
    g = -(Y.transpose(-1, -2) @ X.mean(-2, keepdim=True).expand_as(X)) / n  # (R, K, p, d)
    mean, se = g.mean(1), g.std(1) / math.sqrt(K)
    exact = -problem.M @ problem.Sigma / n
    assert ((mean - exact).abs() / se).max() < 4.5
    gA, gB = empirical_loss_grad(A, B, X, Y)
    torch.testing.assert_close(gA, mean)
    assert gB.abs().max() == 0


def test_minimum_has_zero_excess_and_regulariser(problem):
    A, B = manifold_point(problem)
    assert excess_loss(A, B, problem.M, problem.Sigma).abs().max() < 1e-25
    assert regulariser(A, B, problem.Sigma).abs().max() < 1e-25
