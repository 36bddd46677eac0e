"""Chapter 5's estimates behind its claims: losses against L, prediction gaps, Theorem 4.2 (i)
and (iii), the single head against kernel regressors, other attentions (B.1, B.2)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib import DataConfig, sample_batch
from icl_lib.seeding import derive_seed, generator
from icl_lib import estimators as est
from icl_lib.paper1.optimality.activations import (
    activation_coefficient,
    activation_rates,
    activation_table,
    pattern_estimate,
    rate_spread_estimate,
    realised_rate,
)
from icl_lib.paper1.optimality.trained import ACTIVATIONS_B2, LABELS, linearised
from icl_lib.paper1.optimality.lengths import (
    group_errors,
    labelled,
    length_curves,
    length_estimates,
    length_sweep,
    length_table,
    median_curves,
    posneg_index,
    reference_lines,
)
from icl_lib.paper1.optimality.linear_attention import linear_estimates, linear_vs_softmax, variant_errors
from icl_lib.paper1.optimality.linearisation import (
    _rms_unit_step,
    linearisation_curves,
    linearisation_errors,
    order_estimate,
    paired_heads,
    trained_linearisation_points,
)
from icl_lib.paper1.optimality.predictions import gap_estimate, gap_values
from icl_lib.paper1.optimality.proportional import (
    bayes_limit_estimate,
    bayes_ratio_grid,
    proportional_estimate,
    proportional_specs,
    proportional_table,
    ratio_limits,
    ratio_values,
    sup_ratio_limit,
)
from icl_lib.paper1.optimality.single_head import (
    approx_loss_single_head,
    kernel_regressor_search,
    single_head_vs_kernels,
)
from tests.paper1.optimality_common import fake_run



# ----------------------------------------------------------------------------- losses against L
def test_length_errors_group_errors_and_curves_on_shared_test_sets():
    from icl_lib.seeding import derive_seed

    d, L = 3, 10
    data = DataConfig(d=d, L=L, sigma2=0.1)
    single = [fake_run([0.5], [1.4], d, L, seed=s) for s in (0, 1)]
    two = [fake_run([0.2, -0.2], [2.0, -2.0], d, L), fake_run([0.25, 0.25], [1.6, 1.6], d, L, seed=1)]
    sweep = {1: single, 2: two, 3: []}
    errors = group_errors(sweep, data, [20, 5], n=300, n_sets=2, seed=7)
    assert list(errors) == [1, 2] and errors[2].shape == (2, 2, 600) and errors[1].dtype == torch.float64
    keep = posneg_index(sweep)
    assert keep == {1: [0, 1], 2: [0], 3: []}  # the one-sign 2-head model is left out
    s = derive_seed(7, "length-sweep")
    for j, Lj in enumerate([5, 20]):
        for k in range(2):
            b = sample_batch(data, 300, generator(derive_seed(s, "length-sweep", j, k), "test"), L=Lj)
            for r, run in enumerate(two):
                y = run.model()(b)[0, :, 0]
                direct = ((y - b.yq[..., 0]) ** 2).double()
                np.testing.assert_allclose(errors[2][r, j, k * 300:(k + 1) * 300].numpy(), direct.numpy(),
                                           rtol=1e-5, atol=1e-7)
    curve, se = length_curves(errors, [5, 20], keep)
    assert list(curve.columns) == [1, 2] and list(curve.index) == [5, 20] and curve.index.name == "L"
    np.testing.assert_allclose(curve[2], errors[2][0].mean(-1).numpy(), rtol=1e-12)
    avg = errors[1].mean(0)  # (2, 600): the seed average per sequence
    np.testing.assert_allclose(se[1], (avg.std(-1) / math.sqrt(600)).numpy(), rtol=1e-12)
    everyone, _ = length_curves(errors, [5, 20])
    np.testing.assert_allclose(everyone[2], errors[2].mean((0, 2)).numpy(), rtol=1e-12)
    from icl_lib.engine import stack_models
    per_set = length_sweep(stack_models(two), data, [5, 20], n=300, n_sets=2, seed=s)  # (R, 2, 2)
    np.testing.assert_allclose(per_set.numpy(), errors[2].reshape(2, 2, 2, 300).mean(-1).numpy(), rtol=1e-12)
    ref = {"vanilla GD": np.array([1.0, 2.0]), "Bayes": np.array([0.1, 0.2]), "Bayes se": np.zeros(2)}
    table = length_table(curve, ref)
    assert list(table.columns) == ["H=1", "H=2", "vanilla GD", "Bayes"]


def _const_errors(values, n=50):
    """Squared errors constant over n sequences: (R, |Ls|) -> (R, |Ls|, n) float64."""
    v = torch.tensor(values, dtype=torch.float64)
    return v[..., None].expand(*v.shape, n).clone()


def test_length_estimates_on_hand_built_errors():
    Ls = [5, 10, 20]
    errors = {1: _const_errors([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]),
              2: _const_errors([[2.0, 1.5, 0.5], [2.0, 1.5, 0.5]]),
              3: _const_errors([[2.2, 1.5, 1.5], [9.0, 9.0, 9.0]])}  # the second H = 3 seed is an outlier
    keep = {1: [0, 1], 2: [0, 1], 3: [0]}
    ref = {"debiased GD": np.array([2.0, 1.5, 0.5]), "vanilla GD": np.array([4.2, 1.6, 0.5]),
           "debiased GD, eta*(L)": np.array([1.0, 1.0, 0.5])}
    out, values = length_estimates(errors, keep, ref, Ls, tol=0.1)
    assert out["decreasing"].value == pytest.approx(0.0)  # H = 3 is flat from L = 10 to 20 (both seeds)
    assert out["spread"].value == pytest.approx(2.0)  # 1.5 / 0.5 - 1 at L = 20, kept seeds
    assert out["spread all seeds"].value == pytest.approx((9.0 + 1.5) / 2 / 0.5 - 1)  # the outlier counts
    assert out["track"].value == pytest.approx(2.0) and values.track_L == 20
    assert values.track_ratio == pytest.approx(2.0) and values.track_tol == 0.1
    assert values.gd_ratio_short == pytest.approx((2.0 + 2.2) / 2 / 4.2)
    # rivals at L = 5: H = 2 sits on dGD (2.0): (|2 - 1| - 0)/2 = 0.5 against eta*; H = 3 at 2.2:
    # (|2.2 - 1.0| - 0.2) / 2 = 0.5 and (|2.2 - 4.2| - 0.2) / 2 = 0.9
    assert out["rivals"].value == pytest.approx(0.5)
    assert out["beats single"].value == pytest.approx(0.5)  # 1.5 / 1 - 1 at L = 20 (H = 3)
    assert out["beats single all seeds"].value == pytest.approx((9.0 + 1.5) / 2 / 1.0 - 1)
    for e in out.values():  # constant errors, equal seeds: the intervals shrink to the values
        assert e.lo <= e.value <= e.hi
    assert out["track"].lo == pytest.approx(2.0) and out["track"].hi == pytest.approx(2.0)
    out, values = length_estimates({1: errors[1]}, {1: [0, 1]}, ref, Ls, tol=0.1)
    assert out["spread"] is None and out["track"] is None and math.isnan(values.track)
    assert out["decreasing"].value == pytest.approx(-1 / 3)  # 2 / 3 - 1


def test_length_estimates_intervals_widen_with_noise():
    rng = np.random.default_rng(2)
    Ls = [5, 10]
    noisy = lambda m: torch.tensor(rng.exponential(1.0, size=(3, 2, 400)) * np.array(m)[None, :, None])  # noqa
    errors = {2: noisy([1.0, 0.9]), 3: noisy([1.0, 0.9])}
    ref = {"debiased GD": np.array([1.0, 0.9]), "vanilla GD": np.array([2.0, 1.0]),
           "debiased GD, eta*(L)": np.array([0.8, 0.8])}
    out, _ = length_estimates(errors, {2: [0, 1, 2], 3: [0, 1, 2]}, ref, Ls, tol=0.1)
    e = out["spread all seeds"]
    assert e.lo < e.value < e.hi and e.hi - e.lo > 0.05  # 400 sequences: a few percent either way


def test_median_curves_over_seeds_of_per_sequence_errors():
    e = torch.tensor([[[1.0, 3.0]], [[2.0, 2.0]], [[9.0, 5.0]]], dtype=torch.float64)  # (R=3, |Ls|=1, 2)
    curves, ses = median_curves({"a": e}, {"a": "A"})
    assert curves["A"].tolist() == [2.0]  # median of the model means 2, 2, 7
    want = np.median([np.std(x, ddof=1) / math.sqrt(2) for x in ([1, 3], [2, 2], [9, 5])])
    assert ses["A"][0] == pytest.approx(want)


def test_labelled_and_reference_lines():
    table = pd.DataFrame({1: [1.0, 2.0], "x": [3.0, 4.0]})
    out = labelled(table, "H = {}", drop=["x"])
    assert list(out) == ["H = 1"] and out["H = 1"].tolist() == [1.0, 2.0]
    ref = {"vanilla GD": 1, "debiased GD": 2, "debiased GD, eta*(L)": 3, "Bayes": 4}
    lines = reference_lines(ref, 0.8766)
    assert list(lines) == ["vanilla GD, eta = 0.877", "debiased GD, eta = 0.877", "debiased GD, eta*(L)", "Bayes"]
    assert "Bayes" not in reference_lines(ref, 0.8766, bayes=False)


# ----------------------------------------------------------------------------- prediction level
def test_gap_values_and_gap_estimate():
    gaps = pd.DataFrame({"debiased GD (own eta)": [0.1, 0.2, 0.3], "vanilla GD (own eta)": [0.5, 0.4, 0.3],
                         "pre-cond. debiased GD (own Gamma)": [0.0, 0.0, 0.05], "Bayes": [1.0, 1.0, 0.7]},
                        index=pd.Index([4, 10, 40], name="L"))
    assert dataclasses.asdict(gap_values(gaps, 40)) == {
        "ratio_smallL": 0.2, "dgd_Ltrain": 0.3, "pdgd_Ltrain": 0.05, "bayes_Ltrain": 0.7, "L_small": 4}
    d, L = 3, 12
    data = DataConfig(d=d, L=L, sigma2=0.1)
    runs = [fake_run([0.1, -0.1], [4.0, -4.0], d, L), fake_run([0.05, -0.05], [9.0, -9.0], d, L)]
    _, eta = linearised(runs, d)
    e = gap_estimate(runs, eta, data, [4, 6, 12], n=600, seed=5)
    assert e is not None and e.value < 0.2 and e.lo <= e.value <= e.hi  # small scores: debiased GD
    from icl_lib.engine import stack_models
    from icl_lib.seeding import derive_seed
    vals = []
    for j, Lj in ((0, 4), (1, 6)):
        b = sample_batch(data, 600, generator(derive_seed(5, "prediction-gaps", j), "test"), L=Lj)
        y = stack_models(runs)(b)[..., 0]  # (R, B)
        for r in range(2):
            g_d = ((y[r] - est.debiased_gd_predict(b, float(eta[r]))) ** 2).double()
            g_v = ((y[r] - est.vanilla_gd_predict(b, float(eta[r]))) ** 2).double()
            vals.append(float(g_d.mean() / g_v.mean()))
    assert e.value == pytest.approx(max(vals), rel=1e-4)
    assert gap_estimate(runs, eta, data, [12, 40], n=600, seed=5) is None  # no L' <= L // 2


# ----------------------------------------------------------------------------- Theorem 4.2 (i)
def test_paired_heads_carry_the_rate_and_the_linearisation_order():
    d = 3
    data = DataConfig(d=d, L=20, sigma2=0.1)
    for ratio in (1.0, 0.5):
        m = paired_heads([0.1, 0.4], 0.8, d, ratio=ratio)
        y = m(sample_batch(data, 50, generator(0, "test")))
        assert y.shape[0] == 2
    omegas = [0.01, 0.02, 0.04, 0.08]
    sq = linearisation_errors(omegas, 0.8, data, n=3000, seed=1)
    assert sq.shape == (4, 3000) and sq.dtype == torch.float64
    rms = sq.mean(-1).sqrt().numpy()
    assert np.all(np.diff(np.log(rms)) / np.log(2) > 1.8)  # second order: x4 in RMS per doubling
    table, o2, o1 = linearisation_curves(omegas, 0.8, data, n=3000, seed=1, fit_max=0.08)
    assert list(table.index) == omegas and table.shape == (4, 2)
    assert 1.9 < o2.value < 2.1 and o2.lo < o2.value < o2.hi
    assert 0.9 < o1.value < 1.1  # unequal heads: the second-order term does not cancel
    np.testing.assert_allclose(table["paired heads"].to_numpy(), rms / (0.8 * _rms_unit_step(data, 3000, 1)),
                               rtol=1e-10)


def test_order_estimate_recovers_a_known_slope():
    omegas = [0.01, 0.02, 0.04, 0.08, 0.5]
    rng = np.random.default_rng(3)
    noise = rng.exponential(1.0, size=(1, 2000))
    sq = torch.tensor(np.array(omegas)[:, None] ** 3 * noise)  # RMS ~ omega^1.5 (same noise at every omega)
    e = order_estimate(sq, omegas, fit_max=0.1, n_boot=50, seed=0)
    assert e.value == pytest.approx(1.5, abs=1e-9) and e.lo <= 1.5 <= e.hi
    sq2 = torch.tensor(np.array(omegas)[:, None] ** 2 * rng.exponential(1.0, size=(5, 2000)))
    e2 = order_estimate(sq2, omegas, fit_max=0.1, n_boot=100, seed=0)
    assert e2.lo < 1.0 < e2.hi and e2.hi - e2.lo < 0.1
    with pytest.raises(ValueError, match="fit_max"):
        order_estimate(sq, omegas, fit_max=0.015)


def test_trained_linearisation_points_of_hand_set_runs():
    d, L = 3, 12
    data = DataConfig(d=d, L=L, sigma2=0.1)
    runs = [fake_run([0.02, -0.02], [20.0, -20.0], d, L), fake_run([0.2, -0.2], [2.0, -2.0], d, L, seed=4)]
    t = trained_linearisation_points(runs, data, n=2000, seed=0)
    assert list(t.index) == [0, 4] and t["eta"].to_numpy() == pytest.approx([0.8, 0.8])
    assert t.at[0, "relative RMS (dGD)"] < t.at[4, "relative RMS (dGD)"] / 50  # ~omega^2: 100x
    table, _, _ = linearisation_curves([0.02, 0.2], 0.8, data, n=2000, seed=0, fit_max=0.2)
    np.testing.assert_allclose(t["relative RMS (dGD)"], table["paired heads"], rtol=1e-6)
    assert trained_linearisation_points([], data, n=10, seed=0).empty


# ----------------------------------------------------------------------------- Theorem 4.2 (iii)
def test_ratio_limits_sup_and_ratio_values():
    lim = ratio_limits([0.1, 1.0], [0.1, 1.0], points=5)
    assert lim.shape == (5, 2) and abs(lim.index[0] - 10 ** (-1.3)) < 1e-12
    x = lim.index[2]
    assert abs(lim[1.0].iloc[2] - est.gd_risk_proportional(x, 1.0) / est.bayes_risk_proportional(x, 1.0)) < 1e-12
    sup = sup_ratio_limit(0.1)
    fine = [est.gd_risk_proportional(x, 0.1) / est.bayes_risk_proportional(x, 0.1) for x in np.geomspace(0.01, 10, 4001)]
    assert max(fine) - 1e-3 < sup < max(fine) + 1e-3 and 2.5 < sup < 2.55
    assert sup_ratio_limit(1.0) < sup_ratio_limit(0.25) < sup  # noisier: nearer optimal
    df = pd.DataFrame({"xi": [0.5, 1.0, 0.5], "sigma2": [0.1, 0.1, 2.0], "ratio": [2.0, 1.5, 1.1],
                       "ratio limit": [2.1, 1.5, 1.0]})
    values = ratio_values(df, DataConfig(d=5, L=40, sigma2=0.1), bayes=0.2)
    assert values.rmax == 2.0 and values.s2_top == 2.0 and values.ratio_top == 1.1
    want = est.debiased_gd_risk(est.optimal_eta_debiased(5, 40, 0.1), 5, 40, 0.1) / 0.2
    assert abs(values.ratio_book - want) < 1e-12


def test_finite_size_ratio_stays_below_the_limit_supremum():
    """Was the claim dgd-bayes-ratio-bounded: closed forms and a Monte Carlo of the Bayes risk only."""
    grid = bayes_ratio_grid([0.0625, 0.25, 1.0, 4.0], [0.1, 1.0], d=64, n=20, seed=0)
    for s2 in (0.1, 1.0):
        assert (grid[grid.sigma2 == s2]["ratio"] < sup_ratio_limit(s2) * 1.02).all()


def test_bayes_limit_estimate_on_a_hand_built_grid():
    df = pd.DataFrame({"ratio": [2.0, 1.5], "ratio limit": [2.1, 1.5], "R_Bayes": [0.1, 0.2],
                       "R_Bayes se": [0.0, 0.002]})
    e = bayes_limit_estimate(df)
    assert e.value == pytest.approx(0.1 / 2.1) and e.lo == pytest.approx(0.1 / 2.1)  # se 0 at the largest
    assert e.hi == pytest.approx(0.1 / 2.1)
    df["R_Bayes se"] = [0.01, 0.0]
    assert bayes_limit_estimate(df).hi > 0.1 / 2.1 + 0.05


def test_proportional_specs_table_and_estimate():
    from icl_lib.config import TrainConfig

    cfg = TrainConfig(steps=3, batch=8, n_log=2, val_size=8)
    specs = proportional_specs(4, [0.5, 0.125], 2, 7, 0.2, cfg)
    assert [(s.data.d, s.data.L, s.seed, s.model.heads) for s in specs] == [
        (4, 8, 7, 2), (4, 8, 8, 2), (4, 32, 7, 2), (4, 32, 8, 2)]
    assert all(s.data.sigma2 == 0.2 and s.train == cfg for s in specs)
    assert [s.data.L for s in proportional_specs(3, [0.5, 3.0], 2, 0, 0.1, cfg)] == [6, 6, 2, 2]  # L >= 2
    d = 3
    hand = {0.25: [fake_run([0.05, -0.05], [8.8, -8.8], d, 12, seed=s) for s in (0, 1)],
            0.5: [fake_run([0.05, -0.05], [7.0, -7.0], d, 6, seed=s) for s in (0, 1)]}
    t = proportional_table(hand, n=3000, seed=1, n_bayes=500)
    assert list(t.index) == [0.25, 0.5] and t["L"].tolist() == [12, 6] and t["pos/neg"].tolist() == [2, 2]
    r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(3, 12, 0.1), 3, 12, 0.1)
    assert t.at[0.25, "R_dGD*"] == pytest.approx(r_dgd)
    # two equal seeds: the loss is debiased GD's at eta = 0.88, up to O(omega^2)
    near = est.debiased_gd_risk(0.88, 3, 12, 0.1)
    assert abs(t.at[0.25, "loss"] - near) < 5 * t.at[0.25, "loss se"] + 0.01
    assert t.at[0.25, "loss/R_dGD* - 1"] == pytest.approx(t.at[0.25, "loss"] / r_dgd - 1)
    assert t.at[0.25, "limit ratio"] == pytest.approx(
        est.gd_risk_proportional(0.25, 0.1) / est.bayes_risk_proportional(0.25, 0.1))
    e = proportional_estimate(t)
    assert e.value == pytest.approx(t["loss/R_dGD* - 1"].abs().max()) and e.lo <= e.value <= e.hi


# ----------------------------------------------------------------------------- the single head
def test_approx_loss_single_head_minimises_the_one_head_loss():
    d, L, s2 = 5, 40, 0.1
    w, m = approx_loss_single_head(d, L, s2)
    loss = lambda w, m: 1 + s2 - 2 * m * w + m * m * (w * w + (1 + s2) / L * math.exp(d * w * w))  # noqa
    ws, ms = np.linspace(0.2, 0.8, 301), np.linspace(0.5, 3.0, 501)
    grid = np.array([[loss(a, b) for b in ms] for a in ws])
    i, j = np.unravel_index(grid.argmin(), grid.shape)
    assert abs(ws[i] - w) < 0.01 and abs(ms[j] - m) < 0.01
    assert w == pytest.approx(1 / math.sqrt(5))


def test_single_head_vs_kernels_on_hand_set_single_heads():
    data = DataConfig(d=3, L=12, sigma2=0.1)
    kr = kernel_regressor_search(data, free_mu=True, n=3000, seed=derive_seed(2, "kernel-search"))
    at_opt = fake_run([kr["omega"]], [kr["mu"]], 3, 12, seed=0)
    off = fake_run([kr["omega"]], [3 * kr["mu"]], 3, 12, seed=1)  # far from the optimum
    table, per_seed, sh, values = single_head_vs_kernels([at_opt, off], data, n=3000, seed=2)
    assert list(per_seed.index) == [0, 1]
    row = table.loc["best scaled kernel regressor (free mu)"]
    assert row["omega"] == kr["omega"] and row["mu"] == kr["mu"] and values.kr_mu == kr["mu"]
    assert abs(per_seed.at[0, "ICL loss"] - row["ICL loss"]) < 1e-10  # the regressor itself
    assert per_seed.at[1, "minus best kernel (z)"] > 3 and values.kr_seeds_worse == 1
    assert abs(per_seed.at[0, "excess over best kernel"]) < 1e-9 and per_seed.at[1, "excess over best kernel"] > 0.1
    assert sh["mu"].value == pytest.approx(2.0, rel=1e-6)  # median of mu / mu_best = 1 and 3
    assert sh["omega"].value == pytest.approx(1.0, rel=1e-6)
    assert math.isinf(sh["mu"].hi)  # two seeds cannot bound a median at 95%
    w_app, m_app = approx_loss_single_head(3, 12, 0.1)
    assert sh["rival omega approx"] == pytest.approx(w_app / kr["omega"])
    assert sh["rival mu NW"] == pytest.approx(1 / kr["mu"]) and sh["rival excess NW"] > 0
    t, p, c, v = single_head_vs_kernels([], data, n=3000, seed=2)
    assert t is None and p is None and c == {} and v.nw_seeds == 0 and math.isnan(v.kr_mu)


# ----------------------------------------------------------------------------- B.1 and B.2
def test_variant_errors_linear_vs_softmax_and_linear_estimates():
    d, L = 3, 10
    data = DataConfig(d=d, L=L, sigma2=0.1)
    soft = [fake_run([0.1, -0.1], [4.0, -4.0], d, L), fake_run([0.1, -0.1], [4.5, -4.5], d, L, seed=1)]
    lin = [fake_run([0.2, -0.2], [2.0, -2.0], d, L, attention="linear"),
           fake_run([0.2, -0.2], [2.1, -2.1], d, L, seed=1, attention="linear")]
    kept = {"softmax": soft, "linear": lin}
    Ls = [5, 10, 40]
    errors = variant_errors(kept, data, Ls, n=2000, n_sets=2, seed=4)
    assert errors["softmax"].shape == (2, 3, 4000) and errors["linear"].shape == (2, 3, 4000)
    table, se = linear_vs_softmax(errors, kept, data, Ls)
    want_lin = [np.median([est.vanilla_gd_risk(e * Lj / L, d, Lj, 0.1) for e in (0.8, 0.84)]) for Lj in Ls]
    np.testing.assert_allclose(table["predicted linear"], want_lin, rtol=1e-10)
    np.testing.assert_allclose(table["linear"], want_lin, rtol=0.1)  # a linear model is vanilla GD
    out, ratios = linear_estimates(errors, kept, data, Ls)
    m_lin, m_soft = errors["linear"][:, 1].mean(), errors["softmax"][:, 1].mean()
    assert out["same"].value == pytest.approx(float(m_lin / m_soft - 1))
    assert out["same"].lo < out["same"].value < out["same"].hi
    assert list(ratios.index) == Ls and ratios.at[10, "df"] == 1
    assert out["fixed"].value > 0  # exactly the fixed normaliser: nearer R_GD(Gamma L / N)
    # at L = 40 the step is 4x too long: linear attention loses to softmax
    assert out["beyond"].value == pytest.approx(ratios.at[40, "loss_lin/loss_soft - 1"]) and out["beyond"].value > 1
    errors_short = {k: v[:, :2] for k, v in errors.items()}
    out3, _ = linear_estimates(errors_short, kept, data, [5, 10])
    assert out3["beyond"] is None


def test_activation_rates_table_pattern_and_rate_spread_on_hand_set_runs():
    d, L = 3, 10
    data = DataConfig(d=d, L=L, sigma2=0.1)
    kinds = {a: [fake_run([0.1, -0.1], [4.0 / activation_coefficient(a), -4.0 / activation_coefficient(a)],
                          d, L, attention=a, seed=s) for s in (0, 1)] for a in ACTIVATIONS_B2}
    kinds["linear"] = [fake_run([0.2, -0.2], [2.0, -2.0], d, L, attention="linear")]
    variants = {a: rs + [fake_run([0.1, 0.1], [1.0, 1.0], d, L, seed=2, attention=a)] for a, rs in kinds.items()}
    rates = activation_rates(kinds, data, n=2000, seed=0)
    sq = rates["square"]
    assert list(sq.index) == [0, 1] and sq["|omega|"].tolist() == pytest.approx([0.1, 0.1])
    assert sq["|mu|"].tolist() == pytest.approx([2.0, 2.0]) and sq["c_f sum mu omega"].tolist() == pytest.approx([0.8] * 2)
    real = realised_rate(kinds["square"][0].model(), data, n=2000, seed=derive_seed(0, "realised-rate"))
    assert sq["realised eta"].iloc[0] == pytest.approx(float(real[0]))
    errors = {a: _const_errors([[k, 10.0 + k]] * len(kinds[a]), n=3) for k, a in enumerate(kinds)}
    t = activation_table(variants, rates, errors, data, [5, 10])
    assert list(t.index) == [LABELS[a] for a in [*ACTIVATIONS_B2, "linear"]]
    assert t["pos/neg seeds"].tolist() == ["2/3"] * 4 + ["-"]
    assert t[f"loss at L={L}"].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert abs(t.loc[LABELS["softmax"], "3rd-order prediction"] - 0.8) < 1e-12  # exp: no correction
    p = pattern_estimate(variants["softmax"])
    assert p.value == pytest.approx(2 / 3) and 0 < p.lo < 2 / 3 < p.hi < 1
    spread, per = rate_spread_estimate(rates, "c_f sum mu omega")
    assert spread.value == pytest.approx(0.0, abs=1e-12) and spread.lo == 0.0  # equal rates, no spread
    assert spread.hi == pytest.approx(0.0, abs=1e-9) and list(per.index) == [LABELS[a] for a in ACTIVATIONS_B2]
    hand = {a: pd.DataFrame({"realised eta": [0.8 + 0.1 * k, 0.8 + 0.1 * k + 0.01]})
            for k, a in enumerate(ACTIVATIONS_B2)}
    spread, per = rate_spread_estimate(hand, "realised eta")
    assert spread.value == pytest.approx(1.105 / 0.805 - 1) and spread.lo < spread.value < spread.hi
    one = {a: pd.DataFrame({"realised eta": [0.8]}) for a in ACTIVATIONS_B2}
    assert math.isinf(rate_spread_estimate(one, "realised eta")[0].hi)
