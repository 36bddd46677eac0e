"""Chapter 5's measurements against hand-set models, plain computations and Monte Carlo."""

import math

import numpy as np
import pytest
import torch

from icl_lib import DataConfig, sample_batch
from icl_lib import circuits
from icl_lib.seeding import derive_seed, generator
from icl_lib import estimators as est
from icl_lib.paper1.optimality.activations import activation_coefficient, rate_correction, realised_rate
from icl_lib.paper1.optimality.trained import (
    VARIANTS,
    check_heads,
    check_lengths,
    check_omegas,
    kept_variants,
    learned_rate,
    linearised,
    median_abs_omega,
    posneg_counts,
    posneg_runs,
    stacked_circuits,
    variant_specs,
)
from icl_lib.paper1.optimality.lengths import length_sweep
from icl_lib.paper1.optimality.predictions import paired_losses, prediction_gap_curves, prediction_gaps
from icl_lib.paper1.optimality.proportional import bayes_ratio_grid
from icl_lib.paper1.optimality.risks import closed_form_checks, off_diagonal_mass, reference_curves
from icl_lib.paper1.optimality.single_head import kernel_regressor_search
from icl_lib.stats import extreme, interval_image, paired_ratio, seed_ratio
from tests.paper1.optimality_common import fake_run, hand_set



@pytest.mark.parametrize("attention", ["softmax", "one_plus_tanh", "quadratic", "square"])
def test_small_scale_heads_implement_preconditioned_debiased_gd(attention):
    """Theorem 4.2 (i) and B.2: the gap to debiased GD with Gamma = c_f sum_h mu_h KQ_h vanishes like scale^2."""
    d, eta = 4, 0.8
    data = DataConfig(d=d, L=20, sigma2=0.1)
    c_f = activation_coefficient(attention)
    gaps = []
    for s in (0.04, 0.02):
        model, KQ, OV = hand_set([s, -s], [eta / (2 * s), -eta / (2 * s)], d, attention, off=0.3)
        Gamma = circuits.effective_preconditioner(KQ, OV, d, c_f)[0]  # (d, d)
        assert abs(float(circuits.effective_rate(KQ, OV, d, c_f)[0]) - float(torch.diagonal(Gamma).mean())) < 1e-12
        gap = prediction_gaps(model, data, {"pdgd": lambda b: est.debiased_gd_predict(b, 1.0, Gamma)}, n=4000, seed=1)
        gaps.append(float(gap["pdgd"][0][0]))
    assert gaps[1] < gaps[0] / 3  # O(s^2) in mean square
    assert gaps[0] < 0.01


def test_effective_rate_is_c_f_sum_mu_omega():
    _, KQ, OV = hand_set([0.2, -0.1, 0.05], [2.0, -3.0, 0.5], 3)
    assert abs(float(circuits.effective_rate(KQ, OV, 3)[0]) - (0.4 + 0.3 + 0.025)) < 1e-12
    assert abs(float(circuits.effective_rate(KQ, OV, 3, c_f=2.0)[0]) - 2 * 0.725) < 1e-12
    assert activation_coefficient("square") == 2.0 and activation_coefficient("linear") == 1.0


def test_length_sweep_matches_monte_carlo_of_the_kernel_regressor():
    """A one-head model of pattern (3.1) is mu * NW: its swept loss agrees with mc_risk of scaled_nw_predict."""
    d, omega, mu = 3, 0.6, 1.3
    data = DataConfig(d=d, L=10, sigma2=0.2)
    model, _, _ = hand_set([omega], [mu], d)
    res = length_sweep(model, data, [5, 30], n=4000, n_sets=3, seed=2)
    assert res.shape == (1, 2, 3)
    for j, L in enumerate([5, 30]):
        m, se = est.mc_risk(lambda b: est.scaled_nw_predict(b, omega, mu), data, n=40_000, seed=9, L=L)
        sweep_se = se * math.sqrt(40_000 / (3 * 4000))  # same estimator, 3 x 4000 sequences
        assert abs(float(res[0, j].mean()) - m) < 4 * math.hypot(se, sweep_se)


def test_prediction_gaps_and_paired_losses_against_direct_computation():
    d, omega, mu = 3, 0.5, 1.2
    data = DataConfig(d=d, L=8, sigma2=0.1)
    model, _, _ = hand_set([omega], [mu], d)
    preds = {"same": lambda b: est.scaled_nw_predict(b, omega, mu), "zero": lambda b: torch.zeros_like(b.yq[..., 0])}
    gaps = prediction_gaps(model, data, preds, n=3000, seed=4, chunk=1000)
    assert gaps["same"][0][0] < 1e-20
    # the same sequences, drawn here directly (same generator, same chunks)
    gen = generator(4, "test")
    bs = [sample_batch(data, 1000, gen) for _ in range(3)]
    p = torch.cat([est.scaled_nw_predict(b, omega, mu) for b in bs])
    yq = torch.cat([b.yq[..., 0] for b in bs])
    assert abs(gaps["zero"][0][0] - float((p**2).mean())) < 1e-10
    assert abs(gaps["target"][0][0] - float(((p - yq) ** 2).mean())) < 1e-10
    pl = paired_losses(model, data, preds, n=3000, seed=4, chunk=1000)
    assert abs(pl["model"]["loss"][0] - float(((p - yq) ** 2).mean())) < 1e-10
    assert abs(float(pl["zero"]["loss"]) - float((yq**2).mean())) < 1e-10
    assert abs(pl["zero"]["diff"][0] - (pl["model"]["loss"][0] - float(pl["zero"]["loss"]))) < 1e-12
    assert abs(pl["same"]["diff"][0]) < 1e-12


def test_kernel_regressor_search_finds_the_minimum_of_its_sample():
    data = DataConfig(d=3, L=12, sigma2=0.1)
    b = sample_batch(data, 5000, 6)
    g = (b.x @ b.xq[..., None])[..., 0]

    def risk(omega, mu):
        k = (torch.softmax(omega * g, -1) * b.y[..., 0]).sum(-1)
        return float(((mu * k - b.yq[..., 0]) ** 2).mean())

    nw = kernel_regressor_search(data, free_mu=False, n=5000, seed=6, omega_max=2.0)
    assert nw["mu"] == 1.0 and abs(nw["risk_search"] - risk(nw["omega"], 1.0)) < 1e-12
    for w in np.linspace(0, 2, 41):
        assert nw["risk_search"] <= risk(w, 1.0) + 1e-12
    free = kernel_regressor_search(data, free_mu=True, n=5000, seed=6, omega_max=2.0)
    assert abs(free["risk_search"] - risk(free["omega"], free["mu"])) < 1e-10
    for w in np.linspace(0, 2, 21):
        for m in np.linspace(0.5, 2.5, 21):
            assert free["risk_search"] <= risk(w, m) + 1e-10
    assert free["risk_search"] <= nw["risk_search"]


def test_bayes_ratio_grid_and_reference_curves():
    df = bayes_ratio_grid([0.25, 2.0], [0.1, 1.0], d=16, n=200, seed=0)
    assert len(df) == 4
    # the Bayes risk is the smallest possible: both ratios at least 1 (up to Monte Carlo error)
    assert (df["ratio"] >= 1 - 3 * df["R_Bayes se"] / df["R_Bayes"]).all() and (df["ratio limit"] >= 1).all()
    row = df.iloc[0]
    assert row["L"] == 64 and abs(row["R_dGD*"] - est.debiased_gd_risk(est.optimal_eta_debiased(16, 64, 0.1), 16, 64, 0.1)) < 1e-12
    ref = reference_curves(0.9, 5, [5, 40, 200], 0.1, n_bayes=200)
    assert abs(ref["vanilla GD"][1] - est.vanilla_gd_risk(0.9, 5, 40, 0.1)) < 1e-12
    assert (ref["debiased GD, eta*(L)"] <= ref["debiased GD"] + 1e-12).all()
    assert (ref["Bayes"] < ref["debiased GD, eta*(L)"]).all()
    with pytest.raises(ValueError, match=r"^Ls\[0\]=1 is invalid"):
        check_lengths([1, 5])


@pytest.mark.parametrize("attention", ["softmax", "one_plus_tanh", "quadratic", "square"])
def test_realised_rate_follows_the_third_order_correction(attention):
    """Hand-set symmetric heads at omega = 0.1: the measured rate matches 2 mu omega c_f times
    rate_correction within 1.5% (the next order is of size omega^4 (d+2)^2 ~ 0.5%, times the
    activation's higher Taylor coefficients)."""
    d, eta, w = 5, 0.88, 0.1
    c_f = activation_coefficient(attention)
    model, KQ, OV = hand_set([w, -w], [eta / (2 * w * c_f), -eta / (2 * w * c_f)], d, attention)
    assert abs(float(circuits.effective_rate(KQ, OV, d, c_f)[0]) - eta) < 1e-12
    r = float(realised_rate(model, DataConfig(d=d, L=40, sigma2=0.1), n=20_000, seed=3)[0])
    assert abs(r / (eta * rate_correction(attention, w, d)) - 1) < 0.015
    if attention != "softmax":  # the correction (3.5% to 7% here) is not negligible: the test can tell
        assert abs(r / eta - 1) > 0.025


def test_check_lengths_names_the_parameter_and_bounds_the_lengths():
    assert check_lengths([40, 5, 5, 10.0]) == [5, 10, 40]
    assert check_lengths(7) == [7]
    with pytest.raises(ValueError, match=r"^Ls\[1\]=1 is invalid"):
        check_lengths([5, 1])
    with pytest.raises(ValueError, match=r"^Ls\[0\]=501 is invalid: accepted an integer in \[2, 500\]"):
        check_lengths([501], hi=500)
    for bad in ([], "5", None, [5, "x"], [True]):
        with pytest.raises(ValueError, match=r"^Ls"):
            check_lengths(bad, hi=500)


def test_check_heads_bounds_each_head_count_under_its_name():
    assert check_heads(3, hi=8) == [3] and check_heads([4, 1, 4], hi=8) == [1, 4]
    for bad, name in ((9, r"heads=9"), (0, r"heads=0"), ([1, 9], r"heads\[1\]=9"), ([2, 0.5], r"heads\[1\]=0.5")):
        with pytest.raises(ValueError, match=rf"^{name} is invalid: accepted an integer in \[1, 8\]"):
            check_heads(bad, hi=8)
    for bad in ([], "two", None, True):
        with pytest.raises(ValueError, match=r"^heads="):
            check_heads(bad, hi=8)


def test_posneg_kept_counts_median_omega_and_learned_rate_on_hand_set_runs():
    pn = fake_run([0.2, -0.2], [2.0, -2.0], seed=0)  # positive/negative pattern, eta = 0.8
    pn2 = fake_run([0.3, -0.1], [1.0, -3.0], seed=1)  # eta = 0.6
    same = fake_run([0.2, 0.2], [1.0, 1.0], seed=2)  # one sign: not pos/neg
    single = fake_run([0.5], [1.5])
    assert pn.pattern().kind == "pos/neg" and same.pattern().kind == "single-sign"
    sweep = {1: [single], 2: [pn, same], 3: []}
    posneg = posneg_runs(sweep)
    assert list(posneg) == [2] and posneg[2] == [pn]
    assert posneg_counts(sweep) == {2: "1/2"}
    variants = {"softmax": [same, pn2], "linear": [same], "square": [same]}
    kept = kept_variants(variants)
    assert kept["softmax"] == [pn2] and kept["linear"] == [same] and kept["square"] == [same]
    assert posneg_counts(variants) == {"softmax": "1/2", "square": "0/1"}
    assert abs(median_abs_omega([pn, pn2]) - 0.2) < 1e-12  # median of 0.2, 0.2, 0.3, 0.1
    assert math.isnan(median_abs_omega([]))
    assert abs(learned_rate({2: [pn, pn2], 3: []}, fallback=9.0) - 0.7) < 1e-12
    assert learned_rate({2: []}, fallback=9.0) == 9.0


def test_stacked_circuits_and_linearised_match_each_run():
    runs = [fake_run([0.2, -0.1], [2.0, -3.0]), fake_run([0.4, -0.4], [1.0, -1.0])]
    KQ, OV = stacked_circuits(runs)
    assert KQ.shape == (2, 2, 4, 4) and OV.shape == (2, 2, 1, 4) and KQ.dtype == torch.float64
    Gamma, eta = linearised(runs, 3, c_f=2.0)
    np.testing.assert_allclose(eta, [2 * (0.4 + 0.3), 2 * 0.8], atol=1e-12)
    np.testing.assert_allclose(Gamma[1].numpy(), 2 * 0.8 * np.eye(3), atol=1e-12)


def test_off_diagonal_mass_of_a_hand_built_matrix():
    G = torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=torch.float64)
    assert abs(off_diagonal_mass(G) - 2 / math.sqrt(2)) < 1e-12
    assert off_diagonal_mass(3 * torch.eye(4, dtype=torch.float64)) == 0.0


def test_closed_form_checks_agree_with_the_estimators_and_monte_carlo():
    data = DataConfig(d=3, L=10, sigma2=0.2)
    G = torch.tensor([[0.7, 0.1, 0.0], [0.0, 0.8, 0.0], [0.05, 0.0, 0.6]], dtype=torch.float64)
    t = closed_form_checks(G, 0.7, data, n=20_000, seed=3, n_bayes=2000)
    assert list(t.index) == ["vanilla GD, eta", "debiased GD, eta", "pre-cond. GD, Gamma",
                             "pre-cond. debiased GD, Gamma", "Bayes (design-only MC vs full MC)"]
    closed = [est.vanilla_gd_risk(0.7, 3, 10, 0.2), est.debiased_gd_risk(0.7, 3, 10, 0.2),
              est.preconditioned_gd_risk(G, 3, 10, 0.2, debiased=False),
              est.preconditioned_gd_risk(G, 3, 10, 0.2)]
    np.testing.assert_allclose(t["closed form"].iloc[:4], closed, rtol=1e-12)
    np.testing.assert_allclose(t["z"], (t["Monte Carlo"] - t["closed form"]) / t["se"], rtol=0.2)
    assert (t["z"].abs() < 4).all()
    # the debiased row's Monte Carlo, redone with a direct loop over the same sequences
    from icl_lib.sampling import sample_chunks
    from icl_lib.seeding import derive_seed
    e = torch.cat([(est.debiased_gd_predict(b, 0.7) - b.yq[..., 0]) ** 2
                   for b in sample_chunks(data, 20_000, derive_seed(3, "mc-check", 1), 20_000)])
    assert abs(float(e.mean()) - t.at["debiased GD, eta", "Monte Carlo"]) < 1e-12


def test_prediction_gap_curves_against_a_direct_loop():
    d, L = 3, 12
    data = DataConfig(d=d, L=L, sigma2=0.1)
    runs = [fake_run([0.1, -0.1], [4.0, -4.0], d, L), fake_run([0.05, -0.05], [9.0, -9.0], d, L)]
    Gamma, eta = linearised(runs, d)
    gaps, gaps_se = prediction_gap_curves(runs, Gamma, eta, data, [4, 12], n=600, seed=5)
    assert list(gaps.columns) == ["debiased GD (own eta)", "vanilla GD (own eta)",
                                  "pre-cond. debiased GD (own Gamma)", "debiased GD, eta*(L)", "Bayes",
                                  "ICL loss"]
    from icl_lib.sampling import sample_batch
    from icl_lib.seeding import derive_seed, generator
    for j, Lj in enumerate([4, 12]):
        b = sample_batch(data, 600, generator(derive_seed(5, "prediction-gaps", j), "test"), L=Lj)
        direct_dgd, direct_gd, direct_loss = [], [], []
        for r, run in enumerate(runs):
            y = run.model()(b)[0, :, 0]  # (B,)
            direct_dgd.append(float(((y - est.debiased_gd_predict(b, float(eta[r]))) ** 2).mean()))
            direct_gd.append(float(((y - est.vanilla_gd_predict(b, float(eta[r]))) ** 2).mean()))
            direct_loss.append(float(((y - b.yq[..., 0]) ** 2).mean()))
        assert abs(gaps.at[Lj, "debiased GD (own eta)"] - np.median(direct_dgd)) < 1e-10
        assert abs(gaps.at[Lj, "vanilla GD (own eta)"] - np.median(direct_gd)) < 1e-10
        assert abs(gaps.at[Lj, "ICL loss"] - np.median(direct_loss)) < 1e-10
    # small scores: the heads are debiased GD, far from vanilla GD at the short length
    assert gaps.at[4, "debiased GD (own eta)"] < gaps.at[4, "vanilla GD (own eta)"] / 5
    assert (gaps_se > 0).all().all()


def test_variants_train_every_kind_with_the_sweeps_specs():
    from icl_lib.setups.base import grouped
    from icl_lib.config import TrainConfig
    from icl_lib.engine import train_groups
    from icl_lib.paper1.sweeps import heads_sweep_specs

    data, cfg = DataConfig(d=2, L=4), TrainConfig(steps=3, batch=8, n_log=2, val_size=8)
    out = train_groups(grouped(variant_specs(2, 5, data, cfg), lambda s: s.model.attention), device="cpu")
    assert list(out) == list(VARIANTS)
    for a, runs in out.items():
        assert [(r.spec.model.attention, r.spec.model.heads, r.spec.seed) for r in runs] == [(a, 2, 5), (a, 2, 6)]
    sweep = train_groups({2: heads_sweep_specs([2], 2, 5, data, cfg)}, device="cpu")  # softmax: the sweep's H = 2
    assert all(r.meta.get("cached") for r in sweep[2])
    assert all(torch.equal(a.params["Q"], b.params["Q"]) for a, b in zip(sweep[2], out["softmax"]))


# ----------------------------------------------------------------------------- intervals of claims
def test_extreme_takes_the_extreme_with_bonferroni_intervals():
    from scipy import stats as sps

    e = extreme([0.1, 0.5, -0.2], [0.01, 0.02, 0.03], "max")
    q = sps.norm.ppf(1 - 0.05 / 6)  # three quantities, two-sided 95% family
    assert e.value == 0.5 and e.lo == pytest.approx(max(0.1 - q * 0.01, 0.5 - q * 0.02, -0.2 - q * 0.03))
    assert e.hi == pytest.approx(0.5 + q * 0.02) and "Bonferroni" in e.what
    e = extreme([0.1, 0.5, -0.2], [0.01, 0.02, 0.03], "min")
    assert e.value == -0.2 and e.lo == pytest.approx(-0.2 - q * 0.03) and e.hi == pytest.approx(-0.2 + q * 0.03)
    e = extreme([0.1, -0.5], [0.2, 0.01], "absmax")
    q2 = sps.norm.ppf(1 - 0.05 / 4)
    assert e.value == 0.5 and e.lo == pytest.approx(0.5 - q2 * 0.01) and e.hi == pytest.approx(0.1 + q2 * 0.2)
    assert extreme([0.01], [0.1], "absmax").lo == 0.0  # the interval holds 0
    t = extreme([1.0], [1.0], "max", df=3)  # one quantity, Student's t with 3 df
    assert t.hi == pytest.approx(1 + sps.t.ppf(0.975, 3))
    mixed = extreme([1.0, 0.0], [1.0, 1.0], "max", df=[3, np.nan])  # a df per quantity, NaN: normal
    assert mixed.hi == pytest.approx(1 + sps.t.ppf(1 - 0.05 / 4, 3))
    with pytest.raises(ValueError, match="kind"):
        extreme([1.0], [0.1], "median")
    with pytest.raises(ValueError):
        extreme([1.0, 2.0], [0.1], "max")
    with pytest.raises(ValueError):
        extreme([], [], "max")


def test_interval_image_of_a_kinked_function():
    f = lambda x: abs(x - 1.0) - abs(x - 2.0)  # noqa: E731  -1 below 1, +1 above 2, linear between
    assert interval_image(f, 0.0, 0.5, breaks=(1.0, 2.0)) == (-1.0, -1.0)
    assert interval_image(f, 0.0, 3.0, breaks=(1.0, 2.0)) == (-1.0, 1.0)
    lo, hi = interval_image(f, 1.25, 1.5, breaks=(1.0, 2.0))
    assert (lo, hi) == pytest.approx((-0.5, 0.0))
    g = lambda x: -((x - 1.0) ** 2)  # noqa: E731  the maximum inside is found only through its break
    assert interval_image(g, 0.0, 2.0, breaks=(1.0,)) == (-1.0, 0.0)


def test_paired_ratio_formula_and_coverage():
    rng = np.random.default_rng(0)
    b = rng.exponential(1.0, size=(2, 5000))
    a = 1.1 * b + rng.normal(0, 0.1, size=b.shape)
    rel, se = paired_ratio(a, b)
    assert rel.shape == (2,) and np.allclose(rel, a.mean(-1) / b.mean(-1) - 1)
    r = a.mean(-1) / b.mean(-1)
    want = (a - r[:, None] * b).std(-1, ddof=1) / (math.sqrt(5000) * b.mean(-1))
    np.testing.assert_allclose(se, want, rtol=1e-12)
    rel, se = paired_ratio(2 * b[0], b[0])
    assert rel == pytest.approx(1.0) and se == pytest.approx(0.0, abs=1e-12)
    # coverage of the 95% normal interval of mean(a)/mean(b) - 1 = 0.2 over many test sets
    b = rng.exponential(1.0, size=(800, 400))
    a = 1.2 * b * rng.exponential(1.0, size=b.shape)  # E a / E b = 1.2, a and b correlated
    rel, se = paired_ratio(a, b)
    cover = np.mean(np.abs(rel - 0.2) <= 1.96 * se)
    assert 0.92 < cover < 0.98
    with pytest.raises(ValueError):
        paired_ratio(a[:, :3], b)


def test_seed_ratio_adds_the_spread_over_seeds():
    rng = np.random.default_rng(1)
    b = rng.exponential(1.0, size=(1, 3000))
    a = 1.5 * b
    rel, se, df = seed_ratio(a, b)  # one model each: the test set's error only, no df
    assert rel == pytest.approx(0.5) and se == pytest.approx(0.0, abs=1e-12) and df is None
    # constant errors per model: the test set's error is 0, what remains is the spread over seeds
    a = np.array([[1.0] * 10, [3.0] * 10])  # models with losses 1 and 3
    b = np.array([[1.0] * 10, [1.0] * 10, [1.0] * 10])
    rel, se, df = seed_ratio(a, b)
    assert rel == pytest.approx(1.0) and df == 1
    assert se == pytest.approx(math.sqrt(np.var([1.0, 3.0], ddof=1) / 2))
    rel1, se1, _ = seed_ratio(a[:1], b)
    assert rel1 == pytest.approx(0.0) and se1 == pytest.approx(0.0, abs=1e-12)


def test_check_omegas_sorts_and_needs_two_fitted_points():
    assert check_omegas([0.4, 0.01, 0.02, 0.02], fit_max=0.05) == [0.01, 0.02, 0.4]
    with pytest.raises(ValueError, match="lin_omegas"):
        check_omegas([0.01, 0.4], fit_max=0.05)  # one point to fit a slope on
    with pytest.raises(ValueError, match=r"lin_omegas\[1\]"):
        check_omegas([0.01, 0.0, 0.02], fit_max=0.05)
    with pytest.raises(ValueError):
        check_omegas([0.01, 3.0], fit_max=0.05)
