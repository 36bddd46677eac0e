"""Tests of icl_lib.paper1.anisotropic: the optimal pre-conditioner of one-step GD (chapter 6).

Every closed form is compared with something computed another way: Monte Carlo risks of the
predictors in icl_lib.estimators, an empirical least-squares fit of Gamma on sampled prompts, a
numerical minimiser (scipy), the isotropic formulas of icl_lib.estimators, and Gaussian
conditioning for the posterior mean.
"""

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

import icl_lib as icl
from icl_lib import circuits
from icl_lib.paper1.anisotropic.preconditioner import (
    band_mean,
    head_split,
    min_eig_sym,
    optimal_eta,
    optimal_pgd_risk,
    optimal_preconditioner,
    pgd_moments,
    pgd_risk,
    rel_dist,
    trace_normalise,
)
from icl_lib import estimators as est
from icl_lib.sampling import Batch
from tests.paper1.anisotropic_common import D, LL, S2, kms



# the Bayes posterior mean by Gaussian conditioning, a reference for ridge (only the tests use it)
def posterior_mean_predict(batch: Batch, prior_cov, sigma2: float) -> torch.Tensor:
    """Bayes posterior-mean prediction ``x_q^T P X^T (X P X^T + sigma2 I)^{-1} y`` for the prior
    ``beta ~ N(0, P)``, by Gaussian conditioning of ``beta`` on ``y`` (the kernel form; chapter 6
    uses it to check that ridge with penalty ``sigma2 d`` is the posterior mean also when ``Sigma != I``)."""
    x, y, xq = batch.x, batch.y[..., 0], batch.xq  # (B, L, d), (B, L), (B, d)
    P = torch.as_tensor(prior_cov, dtype=x.dtype, device=x.device)
    K = x @ P @ x.transpose(-1, -2) + sigma2 * torch.eye(x.shape[-2], dtype=x.dtype, device=x.device)  # (B, L, L)
    alpha = torch.linalg.solve(K, y[..., None])[..., 0]  # (B, L)
    beta_hat = (alpha[..., None] * (x @ P)).sum(-2)  # (B, d) = P X^T alpha
    return (beta_hat * xq).sum(-1)


@pytest.mark.parametrize("debiased", [True, False])
def test_isotropic_reduces_to_optimal_eta(debiased):
    G = optimal_preconditioner(torch.eye(D), LL, S2, debiased)
    eta = est.optimal_eta_debiased(D, LL, S2) if debiased else est.optimal_eta_vanilla(D, LL, S2)
    assert torch.allclose(G, eta * torch.eye(D, dtype=torch.float64), atol=1e-12)
    risk = est.debiased_gd_risk if debiased else est.vanilla_gd_risk
    for e in (0.3, eta, 1.2):
        exact = pgd_risk(e * torch.eye(D, dtype=torch.float64), torch.eye(D), LL, S2, debiased)
        assert exact == pytest.approx(risk(e, D, LL, S2), abs=1e-12)
    assert optimal_eta(torch.eye(D), LL, S2, debiased) == pytest.approx(eta, abs=1e-12)


@pytest.mark.parametrize("debiased", [True, False])
def test_risk_formula_matches_monte_carlo(debiased):
    """The closed-form risk at Gamma*, at random (non-symmetric) perturbations of it agrees with the
    Monte Carlo risk of the estimators' predictors within 4 standard errors (a short context,
    L = 8, where the fourth-moment terms of the risk weigh most)."""
    L = 8
    data = icl.DataConfig(d=D, L=L, sigma2=S2, rho=0.6)
    Sigma = data.covariance_matrix()
    G0 = optimal_preconditioner(Sigma, L, S2, debiased)
    gen = torch.Generator().manual_seed(1)
    Gammas = [G0] + [G0 + 0.3 * torch.randn(D, D, generator=gen, dtype=torch.float64) for _ in range(2)]
    predict = est.debiased_gd_predict if debiased else est.vanilla_gd_predict
    for k, G in enumerate(Gammas):
        mc, se = est.mc_risk(lambda b: predict(b, 1.0, G), data, n=30_000, seed=10 + k)
        exact = pgd_risk(G, Sigma, L, S2, debiased)
        assert abs(mc - exact) < 4 * se, (k, mc, se, exact)


@pytest.mark.parametrize("debiased", [True, False])
def test_moments_match_monte_carlo(debiased):
    """A = E[g g^T] and B = E[g beta^T] (the Isserlis / Wishart step of the derivation) against
    their Monte Carlo means over sampled prompts, entry by entry within 5 standard errors."""
    L, n = 8, 60_000
    data = icl.DataConfig(d=D, L=L, sigma2=S2, rho=0.7)
    b = icl.sample_batch(data, n, generator=21)
    x, y, beta = b.x, b.y[..., 0], b.beta[:, 0]  # (n, L, d), (n, L), (n, d)
    xc = x - x.mean(-2, keepdim=True) if debiased else x
    g = (y[..., None] * xc).mean(-2)  # (n, d)
    A, B, c0 = pgd_moments(data.covariance_matrix(), L, S2, debiased)
    for sample, exact in ((g[:, :, None] * g[:, None, :], A), (g[:, :, None] * beta[:, None, :], B)):
        mean, se = sample.mean(0), sample.std(0) / n**0.5
        assert ((mean - exact).abs() < 5 * se).all(), (mean - exact) / se
    assert float((b.yq[:, 0] ** 2).mean()) == pytest.approx(c0, rel=0.02)


@pytest.mark.parametrize("debiased", [True, False])
def test_gamma_star_is_the_least_squares_fit_on_samples(debiased):
    """Direct minimisation of the Monte Carlo risk: on n sampled prompts the risk is quadratic in
    vec(Gamma), so its minimiser is an ordinary least-squares fit of y_q on the features
    g x_q^T.  It converges to the closed-form Gamma* (measured sampling error at n = 50,000, L = 10:
    relative distance 0.025-0.05 over 12 seeds, no bias), and is closer to it than to the other
    form's Gamma* (vanilla against debiased, about 10% apart at L = 10)."""
    rho, n, L = 0.5, 50_000, 10
    data = icl.DataConfig(d=D, L=L, sigma2=S2, rho=rho)
    b = icl.sample_batch(data, n, generator=3)
    x, y, xq, yq = b.x, b.y[..., 0], b.xq, b.yq[..., 0]
    xc = x - x.mean(-2, keepdim=True) if debiased else x
    g = (y[..., None] * xc).mean(-2)  # (n, d)
    feats = (g[:, :, None] * xq[:, None, :]).reshape(n, D * D)  # y_hat = sum_ab g_a Gamma_ab xq_b
    fit = torch.linalg.lstsq(feats, yq[:, None]).solution.reshape(D, D)
    Sigma = data.covariance_matrix()
    G = optimal_preconditioner(Sigma, L, S2, debiased)
    G_other = optimal_preconditioner(Sigma, L, S2, not debiased)
    assert float(rel_dist(fit, G)) < 0.08
    assert float(rel_dist(fit, G)) < float(rel_dist(fit, G_other))
    # and the fitted matrix's population risk is not below Gamma*'s (Gamma* is the population minimiser)
    assert pgd_risk(fit, Sigma, L, S2, debiased) >= pgd_risk(G, Sigma, L, S2, debiased) - 1e-12


@pytest.mark.parametrize("debiased", [True, False])
def test_gamma_star_minimises_the_risk_numerically(debiased):
    """scipy's BFGS on the exact risk over all d x d matrices (no symmetry imposed) finds Gamma*;
    the risk at Gamma* matches optimal_pgd_risk; Gamma* has negative (i, i+2) entries for rho > 0."""
    Sigma = kms(0.5)
    f = lambda v: pgd_risk(v.reshape(D, D), Sigma, LL, S2, debiased)  # noqa: E731
    res = minimize(f, np.zeros(D * D), method="BFGS", options={"gtol": 1e-10})
    G = optimal_preconditioner(Sigma, LL, S2, debiased)
    assert np.allclose(res.x.reshape(D, D), G.numpy(), atol=1e-5)
    assert res.fun == pytest.approx(optimal_pgd_risk(Sigma, LL, S2, debiased), abs=1e-10)
    assert f(G.numpy().ravel()) == pytest.approx(res.fun, abs=1e-10)
    assert float(band_mean(G, 2)) < 0
    assert float(band_mean(torch.linalg.inv(Sigma), 2)) == pytest.approx(0, abs=1e-12)


def test_optimal_risks_order():
    """Pre-conditioning helps on anisotropic data and not on isotropic data; debiased GD's best risk
    is the closed form of estimators at rho = 0."""
    for rho in (0.0, 0.5, 0.8):
        Sigma = kms(rho)
        r_pgd = optimal_pgd_risk(Sigma, LL, S2)
        r_gd = pgd_risk(optimal_eta(Sigma, LL, S2) * torch.eye(D), Sigma, LL, S2)
        if rho == 0:
            assert r_pgd == pytest.approx(r_gd, abs=1e-12)
            assert r_pgd == pytest.approx(est.debiased_gd_risk(est.optimal_eta_debiased(D, LL, S2), D, LL, S2))
        else:
            assert r_pgd < r_gd


def test_ridge_is_posterior_mean_for_anisotropic_covariates():
    """With prior beta ~ N(0, I/d), ridge with penalty sigma2 d equals the posterior mean by Gaussian
    conditioning for any covariate covariance; and its Monte Carlo risk is below ridge with other
    penalties (the posterior mean is Bayes optimal)."""
    data = icl.DataConfig(d=D, L=10, sigma2=S2, rho=0.8)
    b = icl.sample_batch(data, 500, generator=5)
    post = posterior_mean_predict(b, torch.eye(D) / D, S2)
    assert torch.allclose(est.ridge_predict(b, S2 * D), post, atol=1e-9)
    # a non-isotropic prior gives another predictor: the check can fail
    other_prior = posterior_mean_predict(b, data.covariance_matrix() / D, S2)
    assert not torch.allclose(est.ridge_predict(b, S2 * D), other_prior, atol=1e-3)
    risks = {lam: est.mc_risk(lambda bb: est.ridge_predict(bb, lam), data, n=20_000, seed=7)[0]
             for lam in (S2 * D / 3, S2 * D, S2 * D * 3)}
    assert risks[S2 * D] < min(risks[S2 * D / 3], risks[S2 * D * 3])


def test_effective_preconditioner_and_normalisations():
    """effective_preconditioner against a plain loop; trace_normalise, rel_dist, band_mean, min_eig_sym
    against direct numpy computations."""
    gen = torch.Generator().manual_seed(0)
    H, d = 3, 4
    KQ = torch.randn(H, d + 1, d + 1, generator=gen, dtype=torch.float64)
    OV = torch.randn(H, 1, d + 1, generator=gen, dtype=torch.float64)
    loop = sum(OV[h, 0, d] * KQ[h, :d, :d] for h in range(H))
    assert torch.allclose(circuits.effective_preconditioner(KQ, OV, d), loop)
    M = KQ[0, :d, :d]
    Mn = trace_normalise(M)
    assert float(Mn.trace()) == pytest.approx(d)
    assert torch.allclose(trace_normalise(-3 * M), Mn)
    A, B = M.numpy(), KQ[1, :d, :d].numpy()
    assert float(rel_dist(M, KQ[1, :d, :d])) == pytest.approx(np.linalg.norm(A - B) / np.linalg.norm(B))
    band = [A[i, i + 2] for i in range(d - 2)] + [A[i + 2, i] for i in range(d - 2)]
    assert float(band_mean(M, 2)) == pytest.approx(np.mean(band))
    assert float(min_eig_sym(M)) == pytest.approx(np.linalg.eigvalsh((A + A.T) / 2).min())


def test_head_split_against_direct_computation():
    gen = torch.Generator().manual_seed(4)
    d = 3
    KQ = torch.randn(7, 2, d + 1, d + 1, generator=gen, dtype=torch.float64)  # a "history" of 7 steps
    spread, shape = head_split(KQ, d)
    for t in range(7):
        w = [abs(float(np.trace(KQ[t, h, :d, :d].numpy()))) / d for h in range(2)]
        assert float(spread[t]) == pytest.approx((max(w) - min(w)) / np.mean(w))
        a, b = (KQ[t, h, :d, :d].numpy() / (np.trace(KQ[t, h, :d, :d].numpy()) / d) for h in range(2))
        assert float(shape[t]) == pytest.approx(np.linalg.norm(a - b) / np.linalg.norm(b))
    # a mirror pair +-omega Gamma is at 0 on both
    G = optimal_preconditioner(kms(0.5, d), 20, 0.1)
    mirror = torch.zeros(2, d + 1, d + 1, dtype=torch.float64)
    mirror[0, :d, :d], mirror[1, :d, :d] = 0.2 * G, -0.2 * G
    assert [float(v) for v in head_split(mirror, d)] == pytest.approx([0.0, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="exactly 2"):
        head_split(KQ[:, :1], d)


def test_linearised_two_head_model_is_preconditioned_debiased_gd():
    """A two-head softmax model with KQ_h = +-omega Gamma (small omega) and OV_h = (0.., +-mu) predicts
    like debiased GD pre-conditioned by sum_h mu_h KQ_h = 2 mu omega Gamma (paper 1, B.3);
    the error shrinks like omega."""
    data = icl.DataConfig(d=D, L=LL, sigma2=S2, rho=0.5)
    b = icl.sample_batch(data, 2000, generator=11)
    Gamma = optimal_preconditioner(data.covariance_matrix(), LL, S2)
    errs = []
    for omega in (0.02, 0.01):
        mu = 0.5 / omega
        x, y, xq = b.x, b.y[..., 0], b.xq
        pred = 0
        for s in (1, -1):
            a = torch.softmax(s * omega * (x @ Gamma @ xq[..., None])[..., 0], -1)  # (B, L)
            pred = pred + s * mu * (a * y).sum(-1)
        KQ = torch.zeros(2, D + 1, D + 1, dtype=torch.float64)
        KQ[0, :D, :D], KQ[1, :D, :D] = omega * Gamma, -omega * Gamma
        OV = torch.zeros(2, 1, D + 1, dtype=torch.float64)
        OV[0, 0, D], OV[1, 0, D] = mu, -mu
        G_eff = circuits.effective_preconditioner(KQ, OV, D)
        assert torch.allclose(G_eff, Gamma)
        ref = est.debiased_gd_predict(b, 1.0, G_eff)
        errs.append(float((pred - ref).abs().mean() / ref.abs().mean()))
    assert errs[0] < 0.05 and errs[1] < 0.6 * errs[0]


def test_validation_errors():
    with pytest.raises(ValueError, match="L=0 is invalid"):
        optimal_preconditioner(torch.eye(3), 0, 0.1)
    with pytest.raises(ValueError, match="sigma2=-1"):
        pgd_risk(torch.eye(3), torch.eye(3), 10, -1.0)
    with pytest.raises(ValueError, match="Sigma is invalid"):
        optimal_preconditioner(-torch.eye(3), 10, 0.1)
    assert math.isfinite(optimal_pgd_risk(kms(0.9), 10, 0.0))
