"""Closed-form risks of vanilla and debiased GD against Monte Carlo; Bayes limit; claims report."""

import math

import pytest
import torch

from icl_lib import DataConfig
from tests.declaring import Declaring
from icl_lib.claims import Claims
from icl_lib.estimators import (
    bayes_risk_mc,
    bayes_risk_proportional,
    debiased_gd_predict,
    debiased_gd_risk,
    mc_risk,
    optimal_eta_debiased,
    optimal_eta_vanilla,
    vanilla_gd_predict,
    vanilla_gd_risk,
)


@pytest.mark.parametrize("d, L, s2, eta", [(5, 40, 0.1, 0.8), (3, 10, 0.5, 0.6), (8, 12, 0.0, 1.1)])
def test_gd_risks_match_monte_carlo(d, L, s2, eta):
    data = DataConfig(d=d, L=L, sigma2=s2)
    m, se = mc_risk(lambda b: vanilla_gd_predict(b, eta), data, n=200_000, seed=1)
    assert abs(m - vanilla_gd_risk(eta, d, L, s2)) < 4 * se
    m, se = mc_risk(lambda b: debiased_gd_predict(b, eta), data, n=200_000, seed=2)
    assert abs(m - debiased_gd_risk(eta, d, L, s2)) < 4 * se


def test_optimal_steps_minimise_the_risks():
    d, L, s2 = 5, 40, 0.1
    for risk, eta_star in ((vanilla_gd_risk, optimal_eta_vanilla(d, L, s2)),
                           (debiased_gd_risk, optimal_eta_debiased(d, L, s2))):
        r0 = risk(eta_star, d, L, s2)
        assert r0 < risk(eta_star * 1.01, d, L, s2) and r0 < risk(eta_star * 0.99, d, L, s2)
    assert abs(optimal_eta_vanilla(d, L, s2) - 0.8602) < 1e-4
    assert abs(vanilla_gd_risk(optimal_eta_vanilla(d, L, s2), d, L, s2) - 0.2398) < 1e-4
    assert abs(optimal_eta_debiased(d, L, s2) - 0.8791) < 1e-4


@pytest.mark.slow
def test_bayes_limit_close_to_monte_carlo_at_large_size():
    # d = 40, L = 320 is close to the proportional limit xi = 1/8
    m, se = bayes_risk_mc(DataConfig(d=40, L=320, sigma2=0.1), n=20_000, seed=3)
    assert abs(m - bayes_risk_proportional(1 / 8, 0.1)) < 0.01
    assert abs(bayes_risk_proportional(1 / 8, 0.1) - 0.1140) < 1e-3


def test_claims_fail_loudly(capsys):
    c = Declaring("t", "quick")
    c.check("ok", True, 0.123456, "x<1")
    c.check("bad", False, [1.0, 2.0], "x>3")
    with pytest.raises(AssertionError, match="bad"):
        c.report()
    out = capsys.readouterr().out
    assert "CLAIM ok PASS measured=0.1235 interval=- expected=x<1 profiles=quick,paper" in out
    assert "CLAIM bad FAIL measured=[1,2] interval=- expected=x>3 profiles=quick,paper" in out
    with pytest.raises(ValueError):
        c.check("ok", True, 1, "again")
    with pytest.raises(AssertionError):
        Declaring("empty", "quick").report()


# ------------------------------------------------------------------ chapter 5: pre-conditioned GD, Bayes
import math  # noqa: E402

import torch  # noqa: E402

from icl_lib.estimators import (  # noqa: E402
    bayes_risk,
    gd_risk_proportional,
    nadaraya_watson_predict,
    optimal_eta_preconditioned,
    preconditioned_gd_risk,
    ridge_predict,
    scaled_nw_predict,
)
from icl_lib import sample_batch  # noqa: E402


@pytest.mark.parametrize("debiased", [True, False])
def test_preconditioned_risk_matches_monte_carlo(debiased):
    # a non-symmetric pre-conditioner away from the identity
    d, L, s2 = 4, 9, 0.3
    Gamma = 0.7 * torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(5),
                                                                         dtype=torch.float64)
    predict = debiased_gd_predict if debiased else vanilla_gd_predict
    m, se = mc_risk(lambda b: predict(b, 1.0, Gamma), DataConfig(d=d, L=L, sigma2=s2), n=200_000, seed=7)
    assert abs(m - preconditioned_gd_risk(Gamma, d, L, s2, debiased=debiased)) < 4 * se


def test_preconditioned_risk_reduces_to_scalar_step_and_is_minimised():
    d, L, s2, eta = 5, 40, 0.1, 0.7
    eye = torch.eye(d, dtype=torch.float64)
    assert abs(preconditioned_gd_risk(eta * eye, d, L, s2) - debiased_gd_risk(eta, d, L, s2)) < 1e-12
    assert abs(preconditioned_gd_risk(eta * eye, d, L, s2, debiased=False) - vanilla_gd_risk(eta, d, L, s2)) < 1e-12
    assert abs(optimal_eta_preconditioned(eye, d, L, s2) - optimal_eta_debiased(d, L, s2)) < 1e-12
    assert abs(optimal_eta_preconditioned(eye, d, L, s2, debiased=False) - optimal_eta_vanilla(d, L, s2)) < 1e-12
    G = torch.diag(torch.tensor([1.0, 2.0, 0.5, 1.0, 1.5], dtype=torch.float64))
    e = optimal_eta_preconditioned(G, d, L, s2)
    r = preconditioned_gd_risk(e * G, d, L, s2)
    assert r < preconditioned_gd_risk(1.01 * e * G, d, L, s2) and r < preconditioned_gd_risk(0.99 * e * G, d, L, s2)
    # isotropic data: a scalar pre-conditioner is optimal (Cauchy-Schwarz), so G loses to the identity
    assert r > debiased_gd_risk(optimal_eta_debiased(d, L, s2), d, L, s2)
    with pytest.raises(ValueError, match="Gamma"):
        preconditioned_gd_risk(torch.eye(3), d, L, s2)


@pytest.mark.parametrize("d, L, s2", [(5, 40, 0.1), (6, 4, 0.5)])
def test_bayes_risk_design_only_matches_full_monte_carlo(d, L, s2):
    exact, se_exact = bayes_risk(d, L, s2, n=20_000, seed=1)
    m, se = bayes_risk_mc(DataConfig(d=d, L=L, sigma2=s2), n=100_000, seed=2)
    assert abs(m - exact) < 4 * math.hypot(se, se_exact)
    assert se_exact < se  # the design-only estimator has less variance


def test_bayes_risk_noiseless_is_the_missing_dimensions():
    assert bayes_risk(5, 3, 0.0) == (0.4, 0.0) and bayes_risk(5, 8, 0.0) == (0.0, 0.0)
    m, se = mc_risk(lambda b: ridge_predict(b, 1e-9), DataConfig(d=5, L=3, sigma2=0.0), n=100_000, seed=4)
    assert abs(m - 0.4) < 4 * se


def test_gd_limit_matches_exact_risk_at_large_size():
    # exact optimal debiased GD risk at d = 4000, L = d / xi is within O(1/L) of the limit
    for xi, s2 in [(0.125, 0.1), (1.0, 0.5), (4.0, 1.0)]:
        d = 4000
        L = round(d / xi)
        exact = debiased_gd_risk(optimal_eta_debiased(d, L, s2), d, L, s2)
        assert abs(exact - gd_risk_proportional(xi, s2)) < 2 / L
        exact_v = vanilla_gd_risk(optimal_eta_vanilla(d, L, s2), d, L, s2)
        assert abs(exact_v - gd_risk_proportional(xi, s2)) < 2 / L
    # and the Bayes limit agrees with the design-only Monte Carlo at d = 100, xi = 0.5 (finite-size
    # gap about 1e-3 there, Monte Carlo error 2e-4)
    m, se = bayes_risk(100, 200, 0.25, n=100, seed=0)
    assert abs(m - bayes_risk_proportional(0.5, 0.25)) < 0.005


def test_scaled_nw_matches_a_loop():
    b = sample_batch(DataConfig(d=3, L=6), 4, 3)
    omega, mu = 0.8, 1.7
    pred = scaled_nw_predict(b, omega, mu)
    for k in range(4):
        w = torch.tensor([math.exp(omega * float(b.x[k, i] @ b.xq[k])) for i in range(6)], dtype=torch.float64)
        ref = mu * float((w / w.sum() * b.y[k, :, 0]).sum())
        assert abs(float(pred[k]) - ref) < 1e-12
    torch.testing.assert_close(scaled_nw_predict(b, omega, 1.0), nadaraya_watson_predict(b, omega))


# --------------------------------------------------------------------------- intervals (icl_lib.stats)
def test_intervals_have_their_coverage():
    """Simulated coverage of the median, mean and proportion intervals is at least nominal (up to
    simulation error), and the order-statistic interval of 6 values is [min, max]."""
    import numpy as np

    from icl_lib.stats import mean_ci, median_ci, paired_diff, proportion_ci

    rng = np.random.default_rng(0)
    cover = {"median6": 0, "median20": 0, "mean": 0, "prop": 0, "paired": 0}
    trials = 500
    for _ in range(trials):
        x6, x20 = rng.standard_cauchy(6) + 1.0, rng.exponential(size=20)  # medians 1 and log 2
        cover["median6"] += median_ci(x6).lo <= 1.0 <= median_ci(x6).hi
        cover["median20"] += median_ci(x20).lo <= np.log(2) <= median_ci(x20).hi
        m = mean_ci(rng.normal(3.0, 2.0, 8))
        cover["mean"] += m.lo <= 3.0 <= m.hi
        p = proportion_ci(int(rng.binomial(12, 0.3)), 12)
        cover["prop"] += p.lo <= 0.3 <= p.hi
        a = rng.normal(size=400)
        d = paired_diff(a + 0.2 + rng.normal(0, 0.1, 400), a)
        cover["paired"] += d.lo <= 0.2 <= d.hi
    for name, n in cover.items():
        assert n / trials > 0.93, (name, n / trials)
    x = [5.0, 1.0, 4.0, 2.0, 3.0, 6.0]
    assert median_ci(x).interval == (1.0, 6.0) and median_ci(x[:5]).lo == -float("inf")
    e = proportion_ci(3, 6)
    assert e.value == 0.5 and abs(e.lo - 0.1181) < 1e-4 and abs(e.hi - 0.8819) < 1e-4  # Clopper-Pearson
    with pytest.raises(ValueError, match="x="):
        median_ci([1.0, float("nan")])


# --------------------------------------------------------------------------- paired comparisons (chapters 1, 2)
def test_mc_errors_are_mc_risk_s_sequences_and_pair_them():
    """One shared set: each predictor's mean error is mc_risk's for the same seed (same sequences)."""
    from icl_lib.estimators import mc_errors

    data = DataConfig(d=4, L=12, sigma2=0.2)
    preds = {"gd": lambda b: vanilla_gd_predict(b, 0.7), "dgd": lambda b: debiased_gd_predict(b, 0.7)}
    errs = mc_errors(preds, data, n=5_000, seed=9, chunk=2_000)
    assert set(errs) == {"gd", "dgd"} and errs["gd"].shape == (5_000,) and errs["gd"].dtype == torch.float64
    for k, f in preds.items():
        m, se = mc_risk(f, data, n=5_000, seed=9, chunk=2_000)
        assert abs(errs[k].mean().item() - m) < 1e-12 and abs(errs[k].std().item() / math.sqrt(5_000) - se) < 1e-12
    with pytest.raises(ValueError, match="^predictors="):
        mc_errors({}, data)


def test_paired_ratio_covers_the_closed_form_ratio_and_is_tighter_than_unpaired():
    """The paired excess risk of debiased over vanilla GD (steps 0.8, 0.75) covers the closed-form
    ratio - 1 in about 95 % of independent test sets; its interval is far narrower than the risks'."""
    from icl_lib.estimators import mc_errors, relative_excess

    d, L, s2 = 5, 20, 0.1
    data = DataConfig(d=d, L=L, sigma2=s2)
    want = debiased_gd_risk(0.8, d, L, s2) / vanilla_gd_risk(0.75, d, L, s2) - 1
    preds = {"dgd": lambda b: debiased_gd_predict(b, 0.8), "gd": lambda b: vanilla_gd_predict(b, 0.75)}
    covered, trials = 0, 60
    for k in range(trials):
        e = mc_errors(preds, data, n=4_000, seed=100 + k)
        r = relative_excess(e["dgd"], e["gd"])
        covered += r.lo <= want <= r.hi
        m = e["dgd"].mean().item()
        assert abs(r.value - (m / e["gd"].mean().item() - 1)) < 1e-12
        assert r.hi - r.lo < 0.5 * 2 * 1.96 * e["dgd"].std().item() / math.sqrt(4_000) / m  # the pairing pays
    assert covered / trials > 0.85, covered / trials
    with pytest.raises(ValueError, match="^b="):
        relative_excess(torch.ones(3), torch.ones(4))


def test_relative_to_an_exact_reference():
    from icl_lib.estimators import relative
    from icl_lib.stats import Estimate

    rel = relative(Estimate(0.9, 0.85, 0.95, 0.9), 0.9)
    assert rel.value == pytest.approx(0.0) and rel.interval == pytest.approx((-1 / 18, 1 / 18)) and rel.level == 0.9
    with pytest.raises(ValueError, match="^ref="):
        relative(rel, 0.0)


def test_mean_and_standard_error_from_running_sums():
    """mean_se_from_sums equals the mean and std/sqrt(n) of the values themselves, for torch and
    numpy, element-wise, and gives 0 (not NaN) when round-off makes the variance slightly negative."""
    import numpy as np

    from icl_lib.stats import mean_se_from_sums

    x = torch.randn(3, 500, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    m, se = mean_se_from_sums(x.sum(1), (x * x).sum(1), 500)
    torch.testing.assert_close(m, x.mean(1))
    torch.testing.assert_close(se, x.std(1) / math.sqrt(500))
    a = x.numpy()
    m2, se2 = mean_se_from_sums(a.sum(1), (a * a).sum(1), 500)
    np.testing.assert_allclose(se2, se.numpy(), rtol=1e-12)
    assert mean_se_from_sums(torch.tensor(1.0), torch.tensor(0.5 - 1e-15), 2)[1] == 0  # var -1e-15: clipped
    with pytest.raises(ValueError, match="n=1"):
        mean_se_from_sums(1.0, 1.0, 1)
