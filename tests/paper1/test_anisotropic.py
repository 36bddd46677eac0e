"""Tests of icl_lib.paper1.anisotropic: the optimal pre-conditioner of one-step GD (chapter 6).

Every closed form is compared with something computed another way: Monte Carlo risks of the
predictors in icl_lib.estimators, an empirical least-squares fit of Gamma on sampled prompts, a
numerical minimiser (scipy), the isotropic formulas of icl_lib.estimators, and Gaussian
conditioning for the posterior mean.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.optimize import minimize

import icl_lib as icl
from icl_lib import circuits
from icl_lib.paper1 import anisotropic as an
from icl_lib.paper1.anisotropic.experiment import check_lengths, check_rhos, pos_neg_runs, rho_sweep, training_summary
from icl_lib.paper1.anisotropic.learned import (
    B3_MEDIANS,
    b3_estimates,
    circuit_table,
    distance_sweep,
    head_split_histories,
    inverse_distances,
    ov_magnitude_estimate,
    ov_magnitudes,
    preconditioner_values,
    scaled_inverse_blocks,
    split_at,
    split_floor,
    sweep_estimates,
)
from icl_lib.paper1.anisotropic.model_losses import length_losses, loss_estimates, loss_summary, paired_losses
from icl_lib.paper1.anisotropic.preconditioner import (
    band_mean,
    head_split,
    min_eig_sym,
    optimal_eta,
    optimal_pgd_risk,
    optimal_preconditioner,
    pgd_moments,
    pgd_risk,
    reference_values,
    rel_dist,
    risk_check,
    risk_estimates,
    trace_normalise,
)
from icl_lib import estimators as est

from icl_lib.data import Batch

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


# ------------------------------------------------------------------------------- learned Gamma


D, LL, S2 = 5, 40, 0.1


def kms(rho, d=D):
    return icl.kms_covariance(d, rho)


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


# ------------------------------------------------------------------------------- chapter 6's helpers
def _mirror_circuits(blocks, mus, d):
    """KQ (H, D, D) with the given covariate blocks (H, d, d), OV (H, 1, D) with OV[h, 0, d] = mu_h."""
    H, D = len(mus), d + 1
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    KQ[:, :d, :d] = torch.stack([torch.as_tensor(b, dtype=torch.float64) for b in blocks])
    OV = torch.zeros(H, 1, D, dtype=torch.float64)
    OV[:, 0, d] = torch.tensor(mus, dtype=torch.float64)
    return KQ, OV


def _run(KQ, OV, rho=0.5, seed=0, d=3, L=10, sigma2=0.1, KQ_hist=None, steps=None):
    """A hand-built two-head Run whose final circuits are KQ, OV (parameters K = V = I, Q = sqrt(D) KQ,
    O = OV, so that stack_models rebuilds the same circuits); the history is KQ_hist (T, ...) if given."""
    D = d + 1
    spec = icl.RunSpec(data=icl.DataConfig(d=d, L=L, sigma2=sigma2, rho=rho), model=icl.ModelConfig(heads=2),
                       seed=seed)
    eye = torch.eye(D, dtype=torch.float64).expand(2, D, D).clone()
    params = {"Q": KQ * math.sqrt(D), "K": eye, "V": eye.clone(), "O": OV}
    KQ_h = KQ[None] if KQ_hist is None else KQ_hist
    T = KQ_h.shape[0]
    history = {"step": torch.arange(T) * 25 if steps is None else torch.as_tensor(steps), "KQ": KQ_h,
               "OV": OV[None].expand(T, *OV.shape).clone()}
    return icl.Run(spec=spec, params=params, history=history, meta={"ensemble": 1, "seconds": 0.0})


def _npnorm(M):
    """M / (tr M / d) in numpy."""
    M = np.asarray(M, dtype=float)
    return M / (np.trace(M) / M.shape[0])


def _nprel(A, B):
    return np.linalg.norm(np.asarray(A) - np.asarray(B)) / np.linalg.norm(np.asarray(B))


@pytest.mark.parametrize("values, want", [([0, 0.5], (0.0, 0.5)), (0.3, (0.3,)), ((-0.9, 0.99), (-0.9, 0.99)),
                                         ("[0.5]", (0.5,)), (" [0, .8] ", (0.0, 0.8))])
def test_check_rhos_accepts_numbers_in_the_open_interval(values, want):
    assert check_rhos("rhos", values) == want


@pytest.mark.parametrize("values, match", [([], r"^rhos=\[\] is invalid"), ([1.0], r"^rhos\[0\]=1.0 is invalid"),
                                           ([0.2, -1], r"^rhos\[1\]=-1"), ([0.1] * 9, r"^rhos="),
                                           ("0.5", r"^rhos='0.5'"), ([True], r"^rhos\[0\]=True"), (None, r"^rhos="),
                                           ("[0.5, 2]", r"^rhos\[1\]=2"), ("[0.5", r"^rhos='\[0.5'"),
                                           ("['a']", r"^rhos\[0\]='a'"), ("[]", r"^rhos=\[\]")])
def test_check_rhos_names_the_parameter_and_the_bad_element(values, match):
    with pytest.raises(ValueError, match=match):
        check_rhos("rhos", values)


def test_check_lengths_bounds_values_and_count():
    assert check_lengths("eval_L", [10, 2, 640]) == (10, 2, 640)
    assert check_lengths("eval_L", "[40, 80]") == (40, 80)
    assert check_lengths("eval_L", 40) == check_lengths("eval_L", 40.0) == (40,)
    for values, match in (([], r"^eval_L=\[\]"), ([1], r"^eval_L\[0\]=1 is"), ([10, 641], r"^eval_L\[1\]=641"),
                          ([10] * 13, r"^eval_L=\[10,"), (True, r"^eval_L=True"), ([2.5], r"^eval_L\[0\]=2.5"),
                          ("[40", r"^eval_L='\[40'"), ("40", r"^eval_L='40'"), (None, r"^eval_L=None"),
                          ("[1]", r"^eval_L\[0\]=1 ")):
        with pytest.raises(ValueError, match=match):
            check_lengths("eval_L", values)


def test_reference_values_against_numpy():
    """c, the (i, i+2) band of Gamma* = (Sigma + c I)^{-1}, its normalised distance to I and that of
    its scaled inverse (Sigma + c I) / (1 + c) to Sigma, computed directly in numpy."""
    d, L, s2 = 4, 20, 0.2
    S = kms(0.5, d).numpy()
    c = (np.trace(S) + d * s2) / L
    G = np.linalg.inv(S + c * np.eye(d))
    v = reference_values(torch.as_tensor(S), L, s2)
    assert v["c"] == pytest.approx(c, rel=1e-14)
    assert v["band_star"] == pytest.approx(np.mean([G[i, i + 2] for i in range(d - 2)] * 2), rel=1e-12)
    assert v["d_star_I"] == pytest.approx(np.linalg.norm(_npnorm(G) - np.eye(d)) / np.sqrt(d), rel=1e-12)
    assert v["shape_thr"] == pytest.approx(0.25 * v["d_star_I"])
    assert v["inv_star_S"] == pytest.approx(_nprel((S + c * np.eye(d)) / (1 + c), S), rel=1e-12)
    assert math.isnan(reference_values(kms(0.5, 2), L, s2)["band_star"])


def test_risk_check_table():
    """Rows Gamma* and two perturbations; the closed forms are pgd_risk's, Gamma*'s is the smallest
    (the minimiser), Monte Carlo agrees within 5 std errors; the same seed gives the same table."""
    data = icl.DataConfig(d=3, L=8, sigma2=0.1, rho=0.6)
    mc = risk_check(data, n=6000, seed=2)
    assert list(mc.index) == ["Gamma*", "perturbation 1", "perturbation 2"]
    assert list(mc.columns) == ["closed form", "Monte Carlo", "std error", "minus Gamma*", "paired se"]
    star = optimal_pgd_risk(data.covariance_matrix(), 8, 0.1)
    assert mc.loc["Gamma*", "closed form"] == pytest.approx(star, rel=1e-12)
    assert (mc["closed form"].iloc[1:] > star).all()
    assert ((mc["closed form"] - mc["Monte Carlo"]).abs() < 5 * mc["std error"]).all()
    assert mc.equals(risk_check(data, n=6000, seed=2))
    assert not mc.equals(risk_check(data, n=6000, seed=3))


def test_rho_sweep_trains_every_rho_and_seed_then_loads_them():
    """{rho: runs} in the order asked, two heads, run seeds seed..seed+seeds-1; the summary line counts
    models and model-steps and says where the runs came from."""
    cfg = icl.TrainConfig(steps=20, batch=16, n_log=4, val_size=64)
    runs = rho_sweep((0.5, 0.0), seeds=2, seed=3, d=3, L=6, sigma2=0.1, train_cfg=cfg, device="cpu")
    assert list(runs) == [0.5, 0.0]
    for r, rs in runs.items():
        assert [(run.spec.data.rho, run.spec.seed, run.spec.model.heads) for run in rs] == [(r, 3, 2), (r, 4, 2)]
    text = training_summary(runs)
    assert text.startswith("4 models, 80 model-steps; trained as ensembles of 4 models in ")
    assert text.endswith(" s\ntrained now") and max(map(len, text.splitlines())) <= 78
    again = rho_sweep((0.5, 0.0), seeds=2, seed=3, d=3, L=6, sigma2=0.1, train_cfg=cfg, device="cpu")
    assert training_summary(again).endswith(" s\nloaded from the run cache")
    assert torch.equal(again[0.0][1].params["Q"], runs[0.0][1].params["Q"])


def test_circuit_table_of_an_exact_mirror_pair_and_a_single_sign_model():
    """KQ_{1,2} = +-omega Gamma* with 2 mu omega = 1 is the optimal predictor: every distance to Gamma*
    is 0, to I it is reference_values' d_star_I, the smallest eigenvalue is omega lambda_min(Gamma*);
    a second model is checked entry by entry against numpy."""
    d, L, s2, w, mu = 3, 10, 0.1, 0.2, 2.5
    S = kms(0.5, d)
    G = optimal_preconditioner(S, L, s2)
    mirror = _run(*_mirror_circuits([w * G, -w * G], [mu, -mu], d), seed=0)
    gen = torch.Generator().manual_seed(7)
    B = [torch.eye(d) + 0.1 * torch.randn(d, d, generator=gen, dtype=torch.float64) for _ in range(2)]
    other = _run(*_mirror_circuits([0.3 * B[0], 0.1 * B[1]], [1.5, 0.5], d), seed=1)  # one sign
    table = circuit_table({0.5: [mirror, other]})
    assert list(table.seed) == [0, 1] and list(table.pattern) == ["pos/neg", "single-sign"]
    t0 = table.iloc[0]
    for col in ("d(Gamma, Gamma*)", "|G_eff - Gamma*| / |Gamma*|", "head shape distance", "omega spread", "zero-sum"):
        assert t0[col] == pytest.approx(0, abs=1e-12), col
    assert t0["d(Gamma, I)"] == pytest.approx(reference_values(S, L, s2)["d_star_I"], rel=1e-12)
    assert t0["min eig sign(mu_h) KQ_h"] == pytest.approx(w * np.linalg.eigvalsh(G.numpy()).min(), rel=1e-12)
    assert t0["(i,i+2) learned"] == pytest.approx(t0["(i,i+2) Gamma*"], rel=1e-12)
    w_h = w * float(G.trace()) / d
    assert bool(t0["sign matched"]) and t0["omega"] == pytest.approx([w_h, -w_h], abs=1e-3)
    t1, b0, b1 = table.iloc[1], 0.3 * B[0].numpy(), 0.1 * B[1].numpy()
    g_eff = 1.5 * b0 + 0.5 * b1
    Gs = G.numpy()
    assert t1["d(Gamma, Gamma*)"] == pytest.approx(_nprel(_npnorm(g_eff), _npnorm(Gs)), rel=1e-10)
    assert t1["d(Gamma, Sigma^-1)"] == pytest.approx(_nprel(_npnorm(g_eff), _npnorm(np.linalg.inv(S))), rel=1e-10)
    assert t1["|G_eff - Gamma*| / |Gamma*|"] == pytest.approx(_nprel(g_eff, Gs), rel=1e-10)
    assert t1["head shape distance"] == pytest.approx(_nprel(_npnorm(b0), _npnorm(b1)), rel=1e-10)
    eig = min(np.linalg.eigvalsh((b + b.T) / 2).min() for b in (b0, b1))
    assert t1["min eig sign(mu_h) KQ_h"] == pytest.approx(eig, rel=1e-10)
    assert t1["(i,i+2) learned"] == pytest.approx((_npnorm(g_eff)[0, 2] + _npnorm(g_eff)[2, 0]) / 2, rel=1e-10)
    assert math.isnan(circuit_table({0.5: [_run(*_mirror_circuits([G[:2, :2], -G[:2, :2]], [1, -1], 2), d=2)]})
                      .iloc[0]["(i,i+2) learned"])


def test_pos_neg_runs():
    d = 3
    pos_neg = _run(*_mirror_circuits([torch.eye(d), -torch.eye(d)], [1.0, -1.0], d))
    single = _run(*_mirror_circuits([torch.eye(d), 0.8 * torch.eye(d)], [1.0, 0.9], d))
    assert pos_neg_runs([single, pos_neg, single]) == [pos_neg]


def test_head_split_histories_and_floor_against_hand_built_histories():
    """Heads omega_t I and -omega_t (1 + e_t) I: spread e_t / (1 + e_t / 2), shape distance 0; a second
    seed with a tilted second block has a known shape distance; single-sign runs are left out."""
    d, e = 3, torch.tensor([0.4, 0.2, 0.1, 0.05, 0.0], dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    def history(tilt):
        KQ = torch.zeros(5, 2, d + 1, d + 1, dtype=torch.float64)
        KQ[:, 0, :d, :d] = 0.1 * eye
        KQ[:, 1, :d, :d] = -0.1 * (1 + e)[:, None, None] * (eye + tilt)
        return KQ
    tilt = torch.zeros(d, d, dtype=torch.float64)
    tilt[0, 1] = tilt[1, 0] = 0.3
    OV = _mirror_circuits([torch.eye(d)] * 2, [1.0, -1.0], d)[1]
    runs = {r: [_run(h[-1], OV, rho=r, seed=k, KQ_hist=h) for k, h in enumerate([history(0 * tilt), history(tilt)])]
            for r in (0.0, 0.5)}
    runs[0.8] = [_run(*_mirror_circuits([torch.eye(d)] * 2, [1.0, 1.0], d), rho=0.8)]  # single-sign only
    hist = head_split_histories(runs, 0.5)
    assert list(hist) == [0.0, 0.5]
    h = hist[0.5]
    np.testing.assert_array_equal(h["step"], [0, 25, 50, 75, 100])
    np.testing.assert_allclose(h["spread"], np.stack([(e / (1 + e / 2)).numpy()] * 2), atol=1e-12)
    shape = np.linalg.norm(np.asarray(tilt)) / np.linalg.norm(np.eye(d) + np.asarray(tilt))
    np.testing.assert_allclose(h["shape"], [[0.0] * 5, [shape] * 5], atol=1e-12)
    assert split_floor(hist[0.0]) == pytest.approx(np.median([0.0, shape]))
    assert list(head_split_histories(runs, 0.0)) == [0.0]
    assert list(head_split_histories(runs, 0.8)) == [0.0, 0.8] and head_split_histories(runs, 0.8)[0.8] is None
    assert list(head_split_histories({0.5: runs[0.5]}, 0.5)) == [0.5]
    assert math.isnan(split_floor(None))
    tail = dict(h, shape=np.array([[1.0, 2.0, 3.0, 4.0, 5.0]]))
    assert split_floor(tail) == 5.0 and split_floor(tail, tail=0.3) == 4.5


def test_preconditioner_values_are_column_medians():
    pn = pd.DataFrame({"d(Gamma, Gamma*)": [0.1, 0.3, 0.2], "d(Gamma, Sigma^-1)": [1.0, 2.0, 4.0],
                       "d(Gamma, I)": [5.0, 6.0, 7.0], "|G_eff - Gamma*| / |Gamma*|": [0.0, 1.0, 0.5],
                       "(i,i+2) learned": [-0.1, -0.3, -0.2]})
    G = optimal_preconditioner(kms(0.5, 4), 20, 0.1)
    v = preconditioner_values(pn, G)
    band = _npnorm(G.numpy())
    assert v == pytest.approx({"dG": 0.2, "dS": 2.0, "dI": 6.0, "abs": 0.5, "band_l": -0.2,
                               "band_s": np.mean([band[0, 2], band[1, 3], band[2, 0], band[3, 1]])})
    assert set(preconditioner_values(pn, G[:2, :2])) == {"dG", "dS", "dI", "abs"}


def test_inverse_distances_of_blocks_proportional_to_gamma_star():
    """Blocks +-omega Gamma* invert to (Sigma + c I) up to scale: distance 0 to the scaled inverse of
    Gamma*, c ||I - Sigma|| / ((1 + c) ||Sigma||) to Sigma; single-sign models are left out."""
    d, L, s2, w = 3, 10, 0.1, 0.3
    S = kms(0.6, d)
    G = optimal_preconditioner(S, L, s2)
    c = (float(S.trace()) + d * s2) / L
    KQ, OV = _mirror_circuits([w * G, -2 * w * G], [1.0, -1.0], d)
    np.testing.assert_allclose(scaled_inverse_blocks(KQ, d).numpy(), np.stack([(S + c * torch.eye(d)).numpy()
                               / (1 + c)] * 2), atol=1e-12)
    single = _run(*_mirror_circuits([G, G], [1.0, 1.0], d), seed=9)
    table, v = inverse_distances([_run(KQ, OV, seed=4), single], S, G)
    assert list(table.seed) == [4, 4] and list(table["head"]) == [1, 2]
    np.testing.assert_allclose(table["d(inv, Gamma*^-1)"], 0, atol=1e-12)
    want = c * np.linalg.norm(np.eye(d) - S.numpy()) / ((1 + c) * np.linalg.norm(S.numpy()))
    np.testing.assert_allclose(table["d(inv, Sigma)"], want, rtol=1e-10)
    assert v["inv_S"] == pytest.approx(want) and v["inv_G"] == pytest.approx(0, abs=1e-12)
    assert v["inv_cmp"] == "closer to the scaled inverse of Gamma* than to Sigma"
    empty, none = inverse_distances([single], S, G)
    assert len(empty) == 0 and none == {}


def _optimal_model_run(d, L, s2, rho, omega, seed=0):
    """KQ_{1,2} = +-omega Gamma*, OV = (0.., +-mu), 2 mu omega = 1: linearised, debiased GD with Gamma*."""
    G = optimal_preconditioner(kms(rho, d), L, s2)
    mu = 0.5 / omega
    return _run(*_mirror_circuits([omega * G, -omega * G], [mu, -mu], d), rho=rho, seed=seed, d=d, L=L, sigma2=s2)


def test_length_losses_of_models_near_the_optimal_predictor():
    """Models whose linearisation is pre-conditioned debiased GD with Gamma*(L_train): their loss is
    within 3% of that predictor's closed-form risk at every length, which equals R(Gamma*(L)) at the
    training length and exceeds it elsewhere; plain GD's column is the minimum over eta found by
    scipy; the Bayes risk is the smallest; lo <= median <= hi."""
    from scipy.optimize import minimize_scalar

    d, L, s2, rho = 3, 16, 0.1, 0.5
    runs = [_optimal_model_run(d, L, s2, rho, w, seed=k) for k, w in enumerate((0.01, 0.02, 0.03))]
    data = runs[0].spec.data
    t = length_losses(runs, data, [8, 16, 32], n=20_000, seed=1)
    assert list(t.index) == [8, 16, 32] and t.index.name == "L"
    assert (t["model lo"] <= t["model"]).all() and (t["model"] <= t["model hi"]).all()
    assert ((t["model"] / t["PGD, learned Gamma_eff"] - 1).abs() < 0.03).all()
    assert t.loc[16, "PGD, learned Gamma_eff"] == pytest.approx(t.loc[16, "PGD, Gamma*(L)"], rel=1e-10)
    assert (t.loc[[8, 32], "PGD, learned Gamma_eff"] > t.loc[[8, 32], "PGD, Gamma*(L)"]).all()
    S = data.covariance_matrix()
    for Lk in (8, 16, 32):
        best = minimize_scalar(lambda e: pgd_risk(e * torch.eye(d), S, Lk, s2), bounds=(0, 3), method="bounded")
        assert t.loc[Lk, "debiased GD, eta*(L)"] == pytest.approx(best.fun, rel=1e-8)
    assert (t["Bayes (ridge, MC)"] < t["PGD, Gamma*(L)"]).all()


def test_distance_sweep_medians_per_rho():
    """Medians over the positive/negative rows per rho != 0 (single-sign rows, at 99, left out), and
    the median head shape distance at the largest rho."""
    t = pd.DataFrame({
        "rho": [0.0, 0.3, 0.3, 0.3, 0.8, 0.8],
        "pattern": ["pos/neg"] * 3 + ["single-sign", "pos/neg", "single-sign"],
        "d(Gamma, Gamma*)": [9.0, 0.1, 0.3, 99.0, 0.5, 99.0],
        "d(Gamma, Sigma^-1)": [9.0, 1.0, 2.0, 99.0, 3.0, 99.0],
        "d(Gamma, I)": [9.0, 4.0, 6.0, 99.0, 7.0, 99.0],
        "head shape distance": [9.0, 9.0, 9.0, 99.0, 0.25, 99.0],
    })
    sweep, v = distance_sweep(t)
    assert list(sweep.index) == [0.3, 0.8]
    assert sweep.loc[0.3].tolist() == pytest.approx([0.2, 1.5, 5.0]) and sweep.loc[0.8].tolist() == [0.5, 3.0, 7.0]
    assert v == {"shape_maxrho": 0.25}
    assert math.isnan(distance_sweep(t.drop(index=4))[1]["shape_maxrho"])  # no pos/neg row at rho = 0.8


# ------------------------------------------------------------------------------- chapter 6's claims
from icl_lib.claims import Above, Below, Within  # noqa: E402
from icl_lib.stats import Estimate, envelope, largest, median_ci, proportion_ci, seed_median_ci, smallest  # noqa: E402

Z95 = 1.959963984540054


def test_risk_check_pairs_every_matrix_with_gamma_star_on_the_same_prompts():
    """The paired column is the difference of the Monte Carlo means (same prompts), its se is that of
    the per-prompt differences recomputed here, and smaller than the unpaired se of either; the two
    estimates of risk_estimates are the relative error at Gamma* and the smaller paired excess."""
    data = icl.DataConfig(d=3, L=8, sigma2=0.1, rho=0.6)
    mc = risk_check(data, n=6000, seed=2)
    np.testing.assert_allclose(mc["minus Gamma*"], mc["Monte Carlo"] - mc.loc["Gamma*", "Monte Carlo"], atol=1e-12)
    assert mc.loc["Gamma*", "paired se"] == 0
    assert (mc["paired se"].iloc[1:] < mc["std error"].iloc[1:]).all()
    # the per-prompt differences, recomputed with the predictor of icl_lib.estimators
    from icl_lib.data import sample_chunks
    from icl_lib.seeding import derive_seed, generator
    G = optimal_preconditioner(data.covariance_matrix(), 8, 0.1)
    gen = generator(2, "perturbations")
    P = G + 0.1 * G.norm() / 3 * torch.randn(3, 3, generator=gen, dtype=torch.float64)
    b = next(sample_chunks(data, 6000, derive_seed(2, "mc-check"), 20_000))
    diff = ((est.debiased_gd_predict(b, 1.0, P) - b.yq[..., 0]) ** 2
            - (est.debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2)
    assert mc.loc["perturbation 1", "minus Gamma*"] == pytest.approx(float(diff.mean()), rel=1e-10)
    assert mc.loc["perturbation 1", "paired se"] == pytest.approx(float(diff.std() / math.sqrt(6000)), rel=1e-10)
    e = risk_estimates(mc)
    star = mc.loc["Gamma*"]
    assert e["closed form"].value == pytest.approx(star["Monte Carlo"] / star["closed form"] - 1)
    assert e["closed form"].hi - e["closed form"].value == pytest.approx(Z95 * star["std error"] / star["closed form"])
    k = mc["minus Gamma*"].iloc[1:].idxmin()
    assert e["minimum"].value == mc.loc[k, "minus Gamma*"]
    assert e["minimum"].lo == pytest.approx(mc["minus Gamma*"].iloc[1:].sub(Z95 * mc["paired se"].iloc[1:]).min())


def test_seed_median_ci_widens_the_order_statistic_interval_by_the_largest_se():
    x = [0.3, 0.1, 0.5, 0.2, 0.4, 0.6, 0.0]
    assert seed_median_ci(x) == median_ci(x)
    e = seed_median_ci(x, [0.01] * 6 + [0.05])
    m = median_ci(x)
    assert e.value == m.value == 0.3
    assert (e.lo, e.hi) == pytest.approx((m.lo - Z95 * 0.05, m.hi + Z95 * 0.05))
    assert (m.lo, m.hi) == (0.0, 0.6)  # n = 7: [min, max]
    with pytest.raises(ValueError, match="ses"):
        seed_median_ci(x, [0.01] * 6)
    with pytest.raises(ValueError, match="ses"):
        seed_median_ci(x, [-0.01] * 7)


def test_largest_smallest_and_envelope_decide_for_every_group():
    """A Below rule on largest() passes iff every group's interval is below the threshold and fails
    iff some group's interval lies wholly above it; smallest() the same for Above; envelope()
    passes a window iff every interval lies in it."""
    from tests.declaring import Declaring

    c = Declaring("t", "quick", device="cpu")

    def verdict(rule, e):
        c.test(f"c{len(c.items)}", e, rule, "s")
        return c.items[-1].verdict

    E = lambda lo, hi: Estimate((lo + hi) / 2, lo, hi)  # noqa: E731
    below = {"a": E(-0.3, -0.1), "b": E(-0.2, -0.05)}
    assert verdict(Below(0), largest(below)) == "PASS"
    assert verdict(Below(0), largest({**below, "c": E(-0.1, 0.2)})) == "INCONCLUSIVE"
    assert verdict(Below(0), largest({**below, "c": E(0.1, 0.2)})) == "FAIL"
    e = largest({**below, "c": E(0.1, 0.2)})
    assert (e.value, e.lo, e.hi) == pytest.approx((0.15, 0.1, 0.2))
    s = smallest({"a": E(0.1, 0.3), "b": E(0.2, 0.4)})
    assert (s.value, s.lo, s.hi) == pytest.approx((0.2, 0.1, 0.3)) and verdict(Above(0), s) == "PASS"
    assert verdict(Above(0), smallest({"a": E(0.1, 0.3), "b": E(-0.4, -0.2)})) == "FAIL"
    w = {"1": E(-0.01, 0.03), "2": E(0.0, 0.04)}
    h = envelope(w)
    assert (h.lo, h.hi, h.value) == pytest.approx((-0.01, 0.04, 0.02))
    assert verdict(Within(-0.05, 0.05), h) == "PASS"
    assert verdict(Within(-0.05, 0.05), envelope({**w, "3": E(0.03, 0.07)})) == "INCONCLUSIVE"
    with pytest.raises(ValueError, match="estimates"):
        largest({})


def _claims_table():
    """A hand-made circuit_table: rho = 0 (left out of the pooled claims), 0.3 and 0.8."""
    return pd.DataFrame({
        "rho": [0.0] * 2 + [0.3] * 4 + [0.8] * 3,
        "seed": [0, 1, 0, 1, 2, 3, 0, 1, 2],
        "pattern": ["pos/neg", "single-sign"] + ["pos/neg"] * 3 + ["single-sign"] + ["pos/neg"] * 2 + ["single-sign"],
        "OV off-last": [9.0, 9.0, 0.1, 0.2, 0.3, 0.9, 0.4, 0.5, 0.8],
        "zero-sum": [9.0, 9.0, 0.01, 0.02, 0.03, 1.0, 0.04, 0.05, 1.0],
        "omega spread": [9.0, 9.0, 0.1, 0.1, 0.2, 0.3, 0.2, 0.1, 0.5],
        "shape / d(Gamma*, I)": [np.nan, np.nan, 0.2, 0.3, 0.1, 2.0, 0.4, 0.5, 1.5],
        "d(Gamma*) - min(d(Sigma^-1), d(I))": [0.0, 0.0, -0.1, -0.2, -0.1, 0.1, -0.3, -0.2, 0.2],
        "d(Gamma*) - d(I)": [0.0, 0.0, -0.3, -0.2, -0.4, -0.1, -0.5, -0.1, 0.3],
        "band ratio": [np.nan, np.nan, 1.0, 1.2, np.nan, 3.0, 0.9, 1.1, 4.0],
        "sign matched": [True, True, True, True, True, True, True, False, True],
        "positive definite": [True, True, True, True, True, False, True, True, False],
        "mean |mu|": [2.0, 0.5, 2.2, 1.8, 2.0, 0.6, 2.4, 2.1, 0.7],
    })


def test_b3_estimates_pool_the_anisotropic_models_and_report_all_of_them():
    t = _claims_table()
    summary, pn, al = b3_estimates(t)
    aniso = t[t.rho != 0]
    p = aniso[aniso.pattern == "pos/neg"]
    assert al["pos/neg"] == proportion_ci(5, 7) and "pos/neg" not in pn
    assert pn["sign matched"] == proportion_ci(4, 5) and al["sign matched"] == proportion_ci(6, 7)
    assert pn["positive definite"] == proportion_ci(5, 5) and al["positive definite"] == proportion_ci(5, 7)
    for col in B3_MEDIANS:
        assert pn[col] == median_ci(p[col].dropna()), col
        assert al[col] == median_ci(aniso[col].dropna()), col
    assert pn["band ratio"].what.startswith("median of 4")  # the nan entry is left out
    assert list(summary.index) == ["pos/neg", "sign matched", "positive definite", *B3_MEDIANS]
    assert summary.loc["pos/neg", "pos/neg models"] == "-"
    assert summary.loc["zero-sum", "all models"] == f"{al['zero-sum']:.3g}"
    assert (summary["n (pos/neg models)"] == 5).all() and (summary["n (all models)"] == 7).all()
    empty = b3_estimates(t[t.rho == 0])
    assert empty[1] == {} and empty[2] == {}


def test_circuit_table_claim_columns_of_a_mirror_pair():
    """An exact mirror pair +-omega Gamma*: positive definite, shape distance 0, band ratio 1, closer to
    Gamma* than to Sigma^-1 and I by exactly those distances; its mean |mu| is |mu|."""
    d, L, s2, w, mu = 4, 10, 0.1, 0.2, 2.5
    S = kms(0.5, d)
    G = optimal_preconditioner(S, L, s2)
    row = circuit_table({0.5: [_run(*_mirror_circuits([w * G, -w * G], [mu, -mu], d), d=d, L=L)]}).iloc[0]
    assert bool(row["positive definite"]) and row["mean |mu|"] == pytest.approx(mu)
    assert row["shape / d(Gamma*, I)"] == pytest.approx(0, abs=1e-12) and row["band ratio"] == pytest.approx(1)
    assert row["d(Gamma*) - min(d(Sigma^-1), d(I))"] == pytest.approx(-min(row["d(Gamma, I)"],
                                                                          row["d(Gamma, Sigma^-1)"]))
    assert row["d(Gamma*) - d(I)"] == pytest.approx(-row["d(Gamma, I)"])
    iso = circuit_table({0.0: [_run(*_mirror_circuits([w * torch.eye(d), -w * torch.eye(d)], [mu, -mu], d),
                                    rho=0.0, d=d, L=L)]}).iloc[0]
    assert math.isnan(iso["shape / d(Gamma*, I)"]) and math.isnan(iso["band ratio"])


def test_paired_losses_against_the_model_and_the_predictors_alone():
    """The loss is model_risk's on the same prompts, each gap the difference to the reference's own
    Monte Carlo risk on those prompts over its closed form; near-optimal models are within 3% of
    R(Gamma*) and far below plain GD; pairing makes the gap's se smaller than the loss's."""
    d, L, s2 = 3, 16, 0.1
    runs = {0.6: [_optimal_model_run(d, L, s2, 0.6, w, seed=k) for k, w in enumerate((0.01, 0.02))]}
    t = paired_losses(runs, n=4000, seed=3, chunk=1500)
    assert list(t.seed) == [0, 1] and list(t.pattern) == ["pos/neg"] * 2
    data = runs[0.6][0].spec.data
    from icl_lib.seeding import derive_seed
    stream = derive_seed(3, "test-loss-rho")
    risk, se = est.model_risk(icl.stack_models(runs[0.6]), data, n=4000, seed=stream, chunk=1500)
    np.testing.assert_allclose(t["loss"], risk.numpy(), rtol=1e-10)
    np.testing.assert_allclose(t["se"], se.numpy(), rtol=1e-10)
    S = data.covariance_matrix()
    G = optimal_preconditioner(S, L, s2)
    from icl_lib.data import sample_chunks
    e = torch.cat([(est.debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2 for b in sample_chunks(data, 4000, stream, 1500)])
    R = optimal_pgd_risk(S, L, s2)
    np.testing.assert_allclose(t["gap PGD"], (risk.numpy() - float(e.mean())) / R, rtol=1e-9)
    assert (t["gap PGD"].abs() < 0.03).all() and (t["gap dGD"] < -0.05).all()
    assert (t["gap PGD se"] * R < t["se"]).all()
    assert t["R_PGD(Gamma*)"].iloc[0] == pytest.approx(R)
    summary = loss_summary(t)
    assert summary.loc[0.6, "pos/neg seeds"] == 2
    assert summary.loc[0.6, "median loss (pos/neg)"] == pytest.approx(t["loss"].median())
    assert summary.loc[0.6, "test-set se (max)"] == t["se"].max()


def test_loss_estimates_pool_pgd_and_take_the_worst_rho_for_plain_gd():
    rows = []
    for r, gaps in ((0.0, [0.9] * 6), (0.3, [0.01, 0.02, 0.03, 0.0, 0.02, 0.01]), (0.6, [0.02, 0.03, 0.01, 0.04, 0.0, 0.5])):
        for k, g in enumerate(gaps):
            rows.append({"rho": r, "seed": k, "pattern": "single-sign" if g == 0.5 else "pos/neg", "gap PGD": g,
                         "gap PGD se": 0.001, "gap dGD": -0.3 + r / 10 + k / 100, "gap dGD se": 0.002})
    t = pd.DataFrame(rows)
    e = loss_estimates(t)
    pn = t[(t.rho != 0) & (t.pattern == "pos/neg")]
    assert e["PGD"] == seed_median_ci(pn["gap PGD"], pn["gap PGD se"])
    aniso = t[t.rho != 0]
    assert e["PGD (all)"] == seed_median_ci(aniso["gap PGD"], aniso["gap PGD se"])
    six = t[t.rho == 0.6]
    want = seed_median_ci(six["gap dGD"], six["gap dGD se"])  # only rho >= 0.5, all its seeds
    assert e["dGD (all)"].hi == want.hi and e["dGD (all)"].value == want.value
    assert math.isinf(e["dGD"].hi)  # five positive/negative seeds: no order-statistic interval


def test_sweep_estimates_and_ov_magnitudes_on_a_hand_made_table():
    t = _claims_table()
    worst, per = sweep_estimates(t)
    assert list(per.index) == [0.3, 0.8] and list(per["seeds"]) == [4, 3]
    m3, m8 = median_ci(t[t.rho == 0.3]["d(Gamma*) - d(I)"]), median_ci(t[t.rho == 0.8]["d(Gamma*) - d(I)"])
    assert (worst.value, worst.lo, worst.hi) == (max(m3.value, m8.value), max(m3.lo, m8.lo), max(m3.hi, m8.hi))
    assert sweep_estimates(t[t.rho == 0])[0] is None
    ov = ov_magnitudes(t)
    assert list(zip(ov.rho, ov.seed)) == [(0.3, 0), (0.3, 1), (0.8, 0), (0.8, 1)]  # seeds with a rho = 0 model
    assert ov["ratio"].tolist() == pytest.approx([1.1, 3.6, 1.2, 4.2])
    assert ov["both pos/neg"].tolist() == [True, False, True, False]
    assert ov_magnitude_estimate(ov) == median_ci([1.1, 1.2])
    assert ov_magnitude_estimate(ov, pos_neg=False) == median_ci([1.1, 3.6, 1.2, 4.2])
    assert ov_magnitude_estimate(ov_magnitudes(t[t.rho != 0])) is None


def test_split_at_takes_the_median_at_the_first_step_past_the_fraction():
    h = {"step": np.array([0, 10, 20, 30, 40]), "shape": np.array([[5.0, 4, 3, 2, 1], [7, 6, 5, 4, 3], [9, 8, 7, 6, 0]])}
    assert split_at(h, 1.0) == 1.0  # step 40: median of 1, 3, 0
    assert split_at(h, 0.5) == 5.0  # step 20: median of 3, 5, 7
    assert split_at(h, 0.3) == 5.0  # first step >= 12 is 20
    assert split_at(h, 0.0) == 7.0
    assert math.isnan(split_at(None, 0.5))


def test_head_split_histories_reads_runs_of_other_grids_on_the_coarsest():
    """A run recorded every 12.5 steps beside one recorded every 25: both are read on the coarse
    grid, the fine run at the steps the grids share (its values there, exactly)."""
    d = 3
    eye = torch.eye(d, dtype=torch.float64)

    def history(e):
        KQ = torch.zeros(len(e), 2, d + 1, d + 1, dtype=torch.float64)
        KQ[:, 0, :d, :d] = 0.1 * eye
        KQ[:, 1, :d, :d] = -0.1 * (1 + e)[:, None, None] * eye
        return KQ
    coarse = torch.tensor([0.4, 0.2, 0.1, 0.05, 0.0], dtype=torch.float64)
    fine = torch.tensor([0.4, 0.3, 0.2, 0.15, 0.1, 0.07, 0.05, 0.02, 0.0], dtype=torch.float64)
    OV = _mirror_circuits([torch.eye(d)] * 2, [1.0, -1.0], d)[1]
    runs = {0.5: [_run(history(fine)[-1], OV, seed=0, KQ_hist=history(fine), steps=torch.arange(9) * 12.5),
                  _run(history(coarse)[-1], OV, seed=1, KQ_hist=history(coarse))]}
    h = head_split_histories(runs, 0.5)[0.5]
    np.testing.assert_array_equal(h["step"], [0, 25, 50, 75, 100])
    np.testing.assert_allclose(h["spread"], np.stack([(coarse / (1 + coarse / 2)).numpy()] * 2), atol=1e-12)
