"""Chapter 6's estimates behind its claims (icl_lib.paper1.anisotropic)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import icl_lib as icl
from icl_lib.paper1.anisotropic.learned import (
    B3_MEDIANS,
    b3_estimates,
    circuit_table,
    head_split_histories,
    initial_spread_rival,
    ov_magnitude_estimate,
    ov_magnitude_rival,
    ov_magnitudes,
    split_at,
    sweep_estimates,
)
from icl_lib.paper1.anisotropic.model_losses import loss_estimates, loss_summary, rho_sweep_losses, plain_gd_rival
from icl_lib.paper1.anisotropic.preconditioner import (
    optimal_pgd_risk,
    optimal_preconditioner,
    risk_check,
    risk_estimates,
)
from icl_lib import estimators as est
from icl_lib.claims import Above, Below, Within
from icl_lib.stats import Estimate, envelope, largest, median_ci, proportion_ci, seed_median_ci, smallest
from tests.paper1.anisotropic_common import _mirror_circuits, _optimal_model_run, _run, kms

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
    from icl_lib.sampling import sample_chunks
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
        "Gamma* scale": [1.0, 1.0, 1.1, 1.1, 1.1, 1.1, 2.0, 2.0, 2.0],
        "omega spread at init": [9.0, 9.0, 0.5, 0.7, 0.9, 0.1, 0.6, 0.8, 0.1],
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
    assert row["Gamma* scale"] == pytest.approx(float(G.diagonal().mean()))
    assert row["omega spread at init"] == pytest.approx(0, abs=1e-12)  # the history's one record: the mirror pair
    iso = circuit_table({0.0: [_run(*_mirror_circuits([w * torch.eye(d), -w * torch.eye(d)], [mu, -mu], d),
                                    rho=0.0, d=d, L=L)]}).iloc[0]
    assert math.isnan(iso["shape / d(Gamma*, I)"]) and math.isnan(iso["band ratio"])


def test_paired_losses_against_the_model_and_the_predictors_alone():
    """The loss is model_risk's on the same prompts, each gap the difference to the reference's own
    Monte Carlo risk on those prompts over its closed form; near-optimal models are within 3% of
    R(Gamma*) and far below plain GD; pairing makes the gap's se smaller than the loss's."""
    d, L, s2 = 3, 16, 0.1
    runs = {0.6: [_optimal_model_run(d, L, s2, 0.6, w, seed=k) for k, w in enumerate((0.01, 0.02))]}
    t = rho_sweep_losses(runs, n=4000, seed=3, chunk=1500)
    assert list(t.seed) == [0, 1] and list(t.pattern) == ["pos/neg"] * 2
    data = runs[0.6][0].spec.data
    from icl_lib.seeding import derive_seed
    stream = derive_seed(3, "test-loss-rho")
    risk, se = est.model_risk(icl.stack_models(runs[0.6]), data, n=4000, seed=stream, chunk=1500)
    np.testing.assert_allclose(t["loss"], risk.numpy(), rtol=1e-10)
    np.testing.assert_allclose(t["se"], se.numpy(), rtol=1e-10)
    S = data.covariance_matrix()
    G = optimal_preconditioner(S, L, s2)
    from icl_lib.sampling import sample_chunks
    e = torch.cat([(est.debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2 for b in sample_chunks(data, 4000, stream, 1500)])
    R = optimal_pgd_risk(S, L, s2)
    np.testing.assert_allclose(t["gap PGD"], (risk.numpy() - float(e.mean())) / R, rtol=1e-9)
    assert (t["gap PGD"].abs() < 0.03).all() and (t["gap dGD"] < -0.05).all()
    assert (t["gap PGD se"] * R < t["se"]).all()
    assert t["R_PGD(Gamma*)"].iloc[0] == pytest.approx(R)
    # the rival: plain debiased GD's gap to Gamma*, far outside the +-5 % of the claim
    assert plain_gd_rival(t) == pytest.approx(float((t["R_dGD(eta*)"] / t["R_PGD(Gamma*)"] - 1).median()))
    assert plain_gd_rival(t) > 0.05 and plain_gd_rival(t[t.rho == 0]) is None
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
    # the rivals: Gamma*'s own scale over the isotropic one, on the same pairs; the heads' spread at init
    assert ov["Gamma* scale ratio"].tolist() == pytest.approx([1.1, 1.1, 2.0, 2.0])
    assert ov_magnitude_rival(ov) == pytest.approx(1.55) and ov_magnitude_rival(ov, pos_neg=False) == pytest.approx(1.55)
    assert ov_magnitude_rival(ov_magnitudes(t[t.rho != 0])) is None
    assert initial_spread_rival(t) == pytest.approx(0.7)  # median of 0.5, 0.7, 0.9, 0.6, 0.8
    assert initial_spread_rival(t[t.rho == 0]) is None


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
