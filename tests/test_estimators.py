"""Closed-form risks of vanilla and debiased GD against Monte Carlo; Bayes limit; claims report."""

import pytest

from icl_lib import DataConfig
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


def test_bayes_limit_close_to_monte_carlo_at_large_size():
    # d = 40, L = 320 is close to the proportional limit xi = 1/8
    m, se = bayes_risk_mc(DataConfig(d=40, L=320, sigma2=0.1), n=20_000, seed=3)
    assert abs(m - bayes_risk_proportional(1 / 8, 0.1)) < 0.01
    assert abs(bayes_risk_proportional(1 / 8, 0.1) - 0.1140) < 1e-3


def test_claims_fail_loudly(capsys):
    c = Claims("t", "quick")
    c.check("ok", True, 0.123456, "x<1")
    c.check("bad", False, [1.0, 2.0], "x>3")
    with pytest.raises(AssertionError, match="bad"):
        c.report()
    out = capsys.readouterr().out
    assert "CLAIM ok PASS measured=0.1235 expected=x<1" in out
    assert "CLAIM bad FAIL measured=[1,2] expected=x>3" in out
    with pytest.raises(ValueError):
        c.check("ok", True, 1, "again")
    with pytest.raises(AssertionError):
        Claims("empty", "quick").report()
