"""Chapter 3: the values behind Figures 5, 19 and 20, the control variate and the chapter's estimates (icl_lib.paper1.dynamics)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib import DataConfig
from icl_lib.paper1.approx_loss import approx_loss, approx_loss_grad
from icl_lib.paper1.dynamics.approx_descent import (
    ApproxGDConfig,
    approx_gd,
    approx_gd_sweep,
    approx_hessian,
    gd_estimates,
    gd_stages,
    gd_statistics,
    group_labels,
    one_head_optimum,
    single_sign_end,
)
from icl_lib.paper1.dynamics.landscape import (
    landscape_mc,
    landscape_statistics,
    symmetric_two_head,
    true_loss_cv,
    true_loss_mc,
    valley_floor,
    valley_statistics,
    valley_table,
)
from icl_lib.paper1.dynamics.slide import (
    SETTLE_TOL,
    eta_history,
    manifold_scales,
    manifold_slope,
    optimality_estimates,
    optimality_table,
    settle_order_estimate,
)
from icl_lib.paper1.dynamics.norms import (
    attention_norm_lln,
    attention_norm_settings,
    attention_norm_study,
    attention_norms,
    norm_estimates,
    norm_statistics,
    strictly_decreasing,
)
from icl_lib.paper1.dynamics.observations import observation_runs, run_fraction
from icl_lib.paper1.dynamics.stage_detection import stage_estimates, sweep_stages
from icl_lib.seeding import derive_seed
from icl_lib.estimators import debiased_gd_risk
from icl_lib.paper1.approx_loss import loss_star, s_star
from icl_lib.stats import median_ci, proportion_ci
from tests.paper1.dynamics_common import (
    CFG,
    DATA,
    POSNEG_MU,
    POSNEG_OMEGA,
    SINGLE_MU,
    SINGLE_OMEGA,
    fake_run,
    fake_sweep,
)



# ----------------------------------------------------------------------------- Figure 5 and the valley
def test_valley_floor_is_the_reduced_loss_at_its_optimal_m():
    w = np.array([0.05, 0.2, 0.6])
    m, loss = valley_floor(w, CFG)
    c = CFG.c
    s = w**2 / (w**2 + c * np.sinh(CFG.d * w**2))  # (4.1) = 1 + sigma2 - s(w) on the valley floor
    np.testing.assert_allclose(loss, 1 + CFG.sigma2 - s, rtol=1e-12)
    np.testing.assert_allclose(2 * m * w, s, rtol=1e-12)  # s = 2 m w


def test_landscape_mc_matches_direct_evaluations():
    land = landscape_mc(DATA, n=2_000, seed=3)
    assert land["true"].shape == land["se"].shape == land["approx"].shape == (10, 12)
    assert land["valley_true"].shape == (8,) and land["w"][0] == 0.05 and land["m"][-1] == 5.0
    np.testing.assert_array_equal(land["diff"], land["true"] - land["approx"])
    i, j = 3, 7  # m = 2.0, w = 0.4
    omega, mu = symmetric_two_head(land["w"][j], land["m"][i])
    assert float(approx_loss(mu, omega, CFG)) == pytest.approx(land["approx"][i, j], rel=1e-12)
    true, se = true_loss_cv(omega[None], mu[None], DATA, n=2_000, seed=derive_seed(3, "landscape"),
                            dtype=torch.float32)  # the same sequences: the same estimate
    assert float(true[0]) == pytest.approx(land["true"][i, j], rel=1e-5)
    assert float(se[0]) == pytest.approx(land["se"][i, j], rel=1e-4)
    np.testing.assert_allclose(land["valley_m"], valley_floor(land["valley_w"], CFG)[0], rtol=1e-12)
    np.testing.assert_allclose(land["valley_approx"], valley_floor(land["valley_w"], CFG)[1], rtol=1e-12)


def test_landscape_statistics_against_direct_loops():
    rng = np.random.default_rng(0)
    diff, se = rng.normal(size=(10, 12)), rng.uniform(0.01, 0.1, size=(10, 12))
    diff[4, 2], diff[5, 3], se[6, 2], se[6, 3] = -5.0, 9.0, 0.5, 0.9  # the edge w = 0.15 is in, 0.2 is out
    s = landscape_statistics({"w": np.round(np.arange(1, 13) * 0.05, 2), "diff": diff, "se": se})
    small = [0, 1, 2]  # w = 0.05, 0.10, 0.15
    assert s["err_small"] == max(abs(diff[i, j]) for i in range(10) for j in small)
    assert s["excess"] == max(abs(diff[i, j]) - 3 * se[i, j] for i in range(10) for j in small)
    assert s["se_small"] == max(se[i, j] for i in range(10) for j in small)
    assert s["err_w0"] == pytest.approx(sum(abs(diff[i, 0]) for i in range(10)) / 10)
    assert s["err_w1"] == pytest.approx(sum(abs(diff[i, 11]) for i in range(10)) / 10)
    assert (s["err_small"], s["se_small"], s["excess"]) == (5.0, 0.5, 5.0 - 3 * se[4, 2])
    assert s["se_max"] == se.max() and s["diff_max"] == abs(diff).max()
    assert s["se_med"] == pytest.approx(sorted(se.ravel())[59] / 2 + sorted(se.ravel())[60] / 2)


def test_valley_table_and_statistics():
    land = {"valley_w": np.array([0.01, 0.1, 0.6]), "valley_m": np.array([40.0, 4.0, 0.7]),
            "valley_true": np.array([0.242, 0.2421, 0.289]), "valley_se": np.array([0.002, 0.002, 0.003]),
            "valley_approx": np.array([0.2209, 0.221, 0.28])}
    t = valley_table(land)
    assert t.columns.tolist() == ["w", "m*(w)", "true (MC)", "se", "(4.1)"]
    assert t["se"].tolist() == [0.002, 0.002, 0.003]
    v = valley_statistics(land, CFG)
    assert v["approx_decreasing"] and v["true_v0"] == 0.242 and v["true_v1"] == 0.289
    assert v["se_pair"] == pytest.approx(math.sqrt(0.002**2 + 0.003**2))
    s_star = 1 / (1 + 1.1 * 5 / 40)
    assert v["l_star"] == pytest.approx(1.1 - s_star)
    L, d, s2 = 40, 5, 0.1  # the exact risk of debiased GD with step s*, as in the chapter's text
    r = 1 + s2 - 2 * s_star * (L - 1) / L + s_star**2 * (L - 1) * (L + d + s2 * d) / L**2
    assert v["r_dgd"] == pytest.approx(r, rel=1e-12)
    land["valley_approx"] = np.array([0.2209, 0.2208, 0.28])
    assert not valley_statistics(land, CFG)["approx_decreasing"]


# ----------------------------------------------------------------------------- Figure 19
def test_attention_norm_settings_keep_d_over_L():
    s = attention_norm_settings(5, 40, 1.0)
    assert [x[2] for x in s["a"]] == [10, 40, 160, 640, 2560] and {x[1] for x in s["a"]} == {5}
    assert [x[1] for x in s["b"]] == [5, 10, 20, 40, 80] and {x[3] for x in s["b"]} == {1.0}
    assert [x[3] for x in s["c"]] == pytest.approx([1 / math.sqrt(dp) for dp in (5, 10, 20, 40, 80)])
    assert s["b"][1][0] == "L=80, d=10"
    assert [x[1] for x in attention_norm_settings(1, 256, 1.0)["b"]] == [1, 1, 1, 1, 2]  # at least one dimension


def test_attention_norm_study_against_direct_draws():
    draws, st = attention_norm_study(2, 16, 0.5, draws=100, seed=4)
    assert len(draws) == 15 * 100 and st.index.tolist()[:2] == [("a", 10), ("a", 40)]
    direct = attention_norms(10, 80, 0.5 / math.sqrt(10), n=100, seed=derive_seed(4, "attention-norms", 1, ord("c")))
    got = draws[(draws.panel == "c") & (draws.L == 80)]["norm"].to_numpy()
    np.testing.assert_array_equal(got, direct.numpy())
    assert st.loc[("c", 80), "median"] == pytest.approx(float(np.median(direct.numpy())))
    assert st.loc[("c", 80), "q90"] == pytest.approx(float(np.quantile(direct.numpy(), 0.9)))
    assert st.loc[("c", 80), "law median"] == pytest.approx(attention_norm_lln(10, 80, 0.5 / math.sqrt(10)))
    assert st.loc["a", "law median"].isna().all() and st.loc["b", "law median"].isna().all()


def test_norm_statistics_on_a_hand_table():
    idx = pd.MultiIndex.from_product([list("abc"), [10, 20, 40]], names=["panel", "L"])
    st = pd.DataFrame({"median": [0.6, 0.4, 0.1, 0.4, 0.5, 0.6, 0.3, 0.2, 0.1],
                       "q90": [0.9, 0.7, 0.7, 0.7, 0.8, 0.9, 0.4, 0.3, 0.2],
                       "law median": [np.nan] * 6 + [0.3, 0.2, 0.08]}, index=idx)
    n = norm_statistics(st)
    assert not n["a_decreasing"]  # the 90% quantile stalls
    assert (n["a_first"], n["a_last"], n["b_first"], n["b_last"]) == (0.6, 0.1, 0.4, 0.6)
    assert not n["b_decreasing"] and n["c_decreasing"] and n["norm_rel_law"] == pytest.approx(0.25)
    assert strictly_decreasing([3, 2, 1]) and not strictly_decreasing([3, 3, 1]) and strictly_decreasing([1])


# ----------------------------------------------------------------------------- Figure 20
def test_approx_gd_sweep_starts_from_each_runs_initialisation():
    sweep = fake_sweep()
    stages = sweep_stages(sweep, 5)
    gd = ApproxGDConfig(lr=0.05, steps=2_000, n_log=20)
    runs_gd, table = approx_gd_sweep(sweep, stages, CFG, gd)
    starts_mu = np.array([POSNEG_MU[0], SINGLE_MU[0]])
    starts_w = np.array([POSNEG_OMEGA[0], SINGLE_OMEGA[0]])
    direct = approx_gd(starts_mu, starts_w, CFG, gd)
    np.testing.assert_allclose(runs_gd[2]["omega"], direct["omega"], rtol=1e-12)
    assert table["full model"].tolist() == ["p n", "p p"] and table["seed"].tolist() == [0, 1]
    for k in range(2):
        w, m = direct["omega"][-1, k], direct["mu"][-1, k]
        assert table["GD on (4.1)"].iloc[k] == " ".join(g[0] for g in group_labels(w, m))
        assert table["eta GD"].iloc[k] == pytest.approx(float(w @ m), rel=1e-12)
    assert table["eta full"].iloc[0] == pytest.approx(0.3 * 2.0 + 0.3 * 2.0)
    assert table["eta rel. diff"].iloc[1] == pytest.approx(table["eta GD"].iloc[1] / (2 * 0.3 * 0.6) - 1)
    # both heads start with the same sign: GD ends single-sign for the second run
    assert table["GD end kind"].iloc[1] == "single-sign"
    k = 0
    st = gd_stages(runs_gd[2], k, 5)
    np.testing.assert_allclose(st.omega, direct["omega"][:, k], rtol=1e-12)
    assert st.steps.tolist() == direct["step"].tolist()


def test_approx_gd_sweep_reports_a_divergence():
    sweep = fake_sweep()
    runs_gd, table = approx_gd_sweep(sweep, sweep_stages(sweep, 5), CFG, ApproxGDConfig(lr=1.0, steps=5_000))
    assert runs_gd[2]["diverged"] is not None and np.isfinite(runs_gd[2]["omega"]).all()
    assert (table["GD end kind"] == "diverged").all() and not table["non-dummy heads agree"].any()
    assert table["GD on (4.1)"].iloc[0] == f"diverged by step {runs_gd[2]['diverged']}"
    g = gd_statistics(table, 2)
    assert g["gd_frac"] == 0.0 and g["n_agree"] == 0 and np.isnan(g["gd_eta_err"]) and g["gd_dummy_gd"] == 0


def test_gd_statistics_on_a_hand_table():
    table = pd.DataFrame({"H": [4, 4, 4, 2], "non-dummy heads agree": [True, False, True, True],
                          "dummy in full": [1, 0, 2, 0], "dummy in GD": [0, 0, 1, 0],
                          "eta rel. diff": [0.02, -0.5, -0.07, 0.3]})
    g = gd_statistics(table, 4)
    assert g == {"gd_frac": pytest.approx(2 / 3), "n_agree": 2, "gd_eta_err": 0.07, "gd_dummy_full": 2,
                 "gd_dummy_gd": 1}


def test_one_head_optimum_minimises_the_one_head_loss():
    opt = one_head_optimum(CFG)
    assert opt["omega"] == pytest.approx(1 / math.sqrt(5)) and opt["eta"] == pytest.approx(opt["omega"] * opt["mu"])
    g_mu, g_w = approx_loss_grad(np.array([opt["mu"]]), np.array([opt["omega"]]), CFG)
    assert abs(g_mu[0]) < 1e-12 and abs(g_w[0]) < 1e-12  # a stationary point of (4.1)
    best = float(approx_loss(torch.tensor([opt["mu"]]), torch.tensor([opt["omega"]]), CFG))
    for dm, dw in [(0.01, 0), (-0.01, 0), (0, 0.01), (0, -0.01), (0.01, 0.01)]:
        other = approx_loss(torch.tensor([opt["mu"] + dm]), torch.tensor([opt["omega"] + dw]), CFG)
        assert float(other) > best


def test_single_sign_end_picks_the_first_single_sign_start():
    table = pd.DataFrame({"H": [2, 2, 4], "seed": [5, 6, 5], "GD end kind": ["pos/neg", "single-sign", "single-sign"]})
    omega = np.zeros((3, 2, 2))
    omega[-1, 1] = [0.4472, 0.4472]
    mu = np.zeros((3, 2, 2))
    mu[-1, 1] = [1.0, 0.6]
    end = single_sign_end(table, {2: {"omega": omega, "mu": mu}}, CFG, seed=5)
    assert end["H"] == 2 and end["seed"] == 6 and end["mu_sum"] == pytest.approx(1.6)
    np.testing.assert_array_equal(end["omega"], [0.4472, 0.4472])
    want = np.linalg.eigvalsh(approx_hessian(mu[-1, 1], omega[-1, 1], CFG).numpy())
    np.testing.assert_allclose(end["eig"], want, rtol=1e-12)
    assert single_sign_end(table[table["GD end kind"] == "pos/neg"], {}, CFG, seed=5) is None


# ----------------------------------------------------------------------------- the control variate
def test_true_loss_cv_agrees_with_plain_monte_carlo_and_is_sharper_at_small_omega():
    omega, mu = symmetric_two_head(torch.tensor([0.05, 0.4]), torch.tensor([5.0, 1.0]))  # (2, 2)
    cv, se_cv = true_loss_cv(omega, mu, DATA, n=20_000, seed=7)
    mc, se_mc = true_loss_mc(omega, mu, DATA, n=20_000, seed=8)  # other sequences: independent
    assert (torch.abs(cv - mc) < 4 * torch.sqrt(se_cv**2 + se_mc**2)).all()
    assert se_cv[0] < se_mc[0] / 5  # near debiased GD the paired difference is small


def test_true_loss_cv_tends_to_the_debiased_gd_risk():
    # at tiny omega the model is debiased GD with eta = 2 m w: the estimate is its exact risk
    omega, mu = symmetric_two_head(torch.tensor([1e-4]), torch.tensor([0.6 / 2e-4]))
    cv, se = true_loss_cv(omega, mu, DATA, n=4_000, seed=1)
    assert float(cv[0]) == pytest.approx(debiased_gd_risk(0.6, 5, 40, 0.1), abs=1e-3)
    assert float(se[0]) < 1e-3
    with pytest.raises(ValueError, match="n_tasks"):
        true_loss_cv(omega, mu, DataConfig(d=6, L=40, sigma2=0.1, supports=[[0, 1, 2], [3, 4, 5]]), n=10)


# ----------------------------------------------------------------------------- checks moved from the chapter
def test_valley_floor_of_41_decreases_to_its_infimum():
    # was chapter 3's claim valley-approx-limit: both sides come from (4.1), so it is a property
    w = np.geomspace(0.01, 0.6, 8)
    loss = valley_floor(w, CFG)[1]
    assert np.all(np.diff(loss) > 0) and abs(loss[0] - loss_star(CFG)) < 1e-4


def test_unscaled_proportional_norm_grows_with_L():
    # was chapter 3's claim norm-proportional-unscaled: with d = L/8 the law's e^{omega^2 d}/L grows
    # with L whatever the draws; here: the Monte Carlo reproduces that growth
    draws, st = attention_norm_study(5, 40, 1.0, draws=500, seed=2)
    med = st.loc["b", "median"].to_numpy()
    assert np.all(np.diff(med) > 0) and med[-1] > med[0] + 0.2


def test_landscape_and_valley_estimates_against_direct_formulas():
    rng = np.random.default_rng(1)
    w = np.round(np.arange(1, 13) * 0.05, 2)
    diff, se = rng.normal(0, 0.01, size=(10, 12)), rng.uniform(0.001, 0.002, size=(10, 12))
    s = landscape_statistics({"w": w, "diff": diff, "se": se}, CFG)
    a, e = np.abs(diff[:, :3]), se[:, :3]
    assert s["small"].value == a.max() and s["small"].hi == pytest.approx((a + 1.96 * e).max())
    assert s["small"].lo == pytest.approx(max((a - 1.96 * e).max(), 0))
    assert s["degrade"].value == pytest.approx(np.abs(diff[:, -1]).mean() / np.abs(diff[:, 0]).mean())
    assert s["degrade"].lo < s["degrade"].value < s["degrade"].hi
    assert s["gap_limit"] == pytest.approx(s_star(CFG) / 40)
    assert "small" not in landscape_statistics({"w": w, "diff": diff, "se": se})
    land = {"valley_w": np.array([0.01, 0.1, 0.6]), "valley_m": np.array([40.0, 4.0, 0.7]),
            "valley_true": np.array([0.2425, 0.2421, 0.289]), "valley_se": np.array([0.0003, 0.002, 0.004]),
            "valley_approx": np.array([0.2209, 0.221, 0.28])}
    v = valley_statistics(land, CFG)
    assert v["decrease"].value == pytest.approx(0.289 - 0.2425)
    assert v["decrease"].hi - v["decrease"].value == pytest.approx(1.96 * math.hypot(0.0003, 0.004))
    assert v["limit"].value == pytest.approx(0.2425 - v["r_dgd"])
    assert v["limit"].value - v["limit"].lo == pytest.approx(1.96 * 0.0003)


def test_norm_estimates_on_hand_draws():
    rows = []
    for panel, Ls in (("a", (10, 40)), ("b", (40, 80)), ("c", (40, 80))):
        for k, LL in enumerate(Ls):
            for v in np.linspace(0.1, 0.3, 11) / (k + 1):
                rows.append({"panel": panel, "L": LL, "d": 5, "omega": 1.0, "norm": float(v)})
    draws = pd.DataFrame(rows)
    st = pd.DataFrame({"law median": [np.nan] * 5 + [0.08]},
                      index=pd.MultiIndex.from_tuples([("a", 10), ("a", 40), ("b", 40), ("b", 80), ("c", 40),
                                                       ("c", 80)], names=["panel", "L"]))
    ne = norm_estimates(draws, st)
    m0, m1 = median_ci(np.linspace(0.1, 0.3, 11)), median_ci(np.linspace(0.1, 0.3, 11) / 2)
    assert ne["a_ratio"].value == pytest.approx(0.5)
    assert ne["a_ratio"].lo == pytest.approx(m1.lo / m0.hi) and ne["a_ratio"].hi == pytest.approx(m1.hi / m0.lo)
    assert ne["c_law"].value == pytest.approx(0.1 / 0.08 - 1) and ne["c_law"].lo == pytest.approx(m1.lo / 0.08 - 1)


# ----------------------------------------------------------------------------- stage, Observation-4 and GD estimates
def test_stage_estimates_against_hand_counts():
    nan = float("nan")
    table = pd.DataFrame({"H": [2, 2, 2, 4, 4, 4], "seed": [0, 1, 2, 0, 1, 2],
                          "pattern (3.1)": [10, 40, nan, 20, 30, 50],
                          "Stage I": [5, 50, nan, nan, 30, 10], "Stage II": [8, 40, nan, 70, 30, 60]})
    e = stage_estimates(table, last=100)
    assert e["shape_step"].value == pytest.approx(35.0)  # the missing run counts as 101
    assert e["kept"].value == pytest.approx(5 / 6) and e["kept"].interval == proportion_ci(5, 6).interval
    assert e["order"].value == pytest.approx(3 / 4)  # (5, 8), (50, 40), (30, 30), (10, 60)
    assert e["both"][2].value == pytest.approx(2 / 3) and e["both"][4].value == pytest.approx(2 / 3)
    none = stage_estimates(table.assign(**{"Stage I": nan}), 100)
    assert np.isnan(none["order"].value) and none["order"].interval == (0.0, 1.0)


def test_observation_runs_against_a_plain_loop():
    sweep = fake_sweep()
    runs = observation_runs(sweep, sweep_stages(sweep, 5), [2])
    assert runs["seed"].tolist() == [0, 1] and runs["final pattern"].tolist() == ["pos/neg", "single-sign"]
    w = np.abs(np.array(POSNEG_OMEGA))
    drops = [1 - w[-1, h] / w[:, h].max() for h in range(2)]
    assert runs["omega drop (median head)"].iloc[0] == pytest.approx(np.median(drops))
    assert runs["omega falls"].tolist() == [True, False]  # the single-sign run ends at its peak
    m = np.abs(np.array(SINGLE_MU)).sum(1)  # one group: the sum of both heads
    assert runs["group mu final/max (min)"].iloc[1] == pytest.approx(m[-1] / m.max())
    assert runs["group mu final/mid (min)"].iloc[1] == pytest.approx(m[-1] / m[2])
    assert runs["mu rises"].tolist() == [True, True]
    f = run_fraction(runs, 2, "omega falls")
    assert f.value == 0.5 and f.interval == proportion_ci(1, 2).interval
    with pytest.raises(ValueError, match="H=3"):
        run_fraction(runs, 3, "omega falls")


def test_gd_estimates_on_a_hand_table():
    table = pd.DataFrame({"H": [4] * 7 + [2], "non-dummy heads agree": [True] * 6 + [False, True],
                          "eta rel. diff": [0.01, -0.02, 0.03, 0.0, 0.05, -0.04, 0.5, 0.3]})
    g = gd_estimates(table, 4)
    assert g["agree"].value == pytest.approx(6 / 7) and g["n_agree"] == 6
    assert g["eta"].interval == (-0.04, 0.05)  # six values: [min, max]
    g2 = gd_estimates(table, 2)
    assert g2["eta"].lo == -math.inf  # one value cannot bound a median


# ----------------------------------------------------------------------------- (4.3) and (4.5)
def slide_run(seed, T=40, settle=10, s=None, slope=-1.0, start_w=0.3, end_w=0.18):
    """Two heads, +-omega and +-mu: eta rises to s (default s*) by step 10 * settle, then omega_bar
    falls from start_w to end_w while mu_bar follows mu_bar ~ omega_bar^slope."""
    s = s_star(CFG) if s is None else s
    t = np.arange(T)
    fall = start_w * (end_w / start_w) ** ((t - settle) / (T - 1 - settle))
    w = np.where(t < settle, start_w * (t + 1) / settle, fall)
    m_settled = s / (2 * start_w) * (w / start_w) ** slope
    m = np.where(t < settle, s / (2 * start_w) * (t + 1) / settle, m_settled)
    return fake_run(seed, np.stack([w, -w], 1), np.stack([m, -m], 1))


def test_eta_history_and_manifold_scales():
    run = fake_run(0, [[0.1, -0.2, 0.01], [0.2, -0.3, 0.01]], [[1.0, -0.5, 0.001], [2.0, -1.0, 0.001]])
    st = sweep_stages({3: [run]}, 5)[3][0]
    np.testing.assert_allclose(eta_history(st), [0.1 + 0.1 + 1e-5, 0.4 + 0.3 + 1e-5])
    assert st.groups == ["positive", "negative", "dummy"]
    w_bar, m_bar = manifold_scales(st)
    np.testing.assert_allclose(w_bar, [0.15, 0.25])  # the dummy head is left out
    np.testing.assert_allclose(m_bar, [0.75, 1.5])  # mean of |sum mu| over the two groups


def test_manifold_slope_on_designed_slides():
    steps = np.arange(30)
    w = np.geomspace(0.3, 0.2, 30)
    assert manifold_slope(steps, w, 0.44 / w, 0)[0] == pytest.approx(-1.0)
    assert manifold_slope(steps, w, np.full(30, 2.0), 0)[0] == pytest.approx(0.0)
    jitter = 1 + 0.02 * np.sin(7 * steps)  # Adam-like jitter in omega: the median slope stays near -1
    assert manifold_slope(steps, w * jitter, 0.44 / w, 0)[0] == pytest.approx(-1.0, abs=0.1)
    slope, dw, n = manifold_slope(steps, w, 0.44 / w, 25)
    assert np.isnan(slope) and n == 5  # too few steps
    assert np.isnan(manifold_slope(steps, np.full(30, 0.2), np.full(30, 2.0), 0)[0])  # omega did not move


def test_optimality_table_and_estimates_on_designed_runs():
    sweep = {2: [slide_run(0), slide_run(1, slope=0.0), slide_run(2, s=1.0)]}
    stages = sweep_stages(sweep, 5)
    opt = optimality_table(sweep, stages, [2], CFG)
    r0, r1, r2 = (opt.iloc[k] for k in range(3))
    assert r0["(4.3) from"] == 90 and r0["eta/s* (late)"] == pytest.approx(1.0)
    assert r0["slope dlog mu/dlog omega"] == pytest.approx(-1.0, abs=1e-9)
    assert r0["slide from"] == max(r0["Stage II"], 90) and r0["slide steps"] == 31
    lw = np.log(np.r_[0.3, np.geomspace(0.3, 0.18, 30)])  # omega_bar over the slide, steps 90..390
    assert r0["omega_bar change"] == pytest.approx(math.expm1(np.median(lw[-10:]) - np.median(lw[:10])))
    # mu fixed while omega falls 40%: eta leaves the band, so (4.3) is established late or never
    assert np.isnan(r1["(4.3) from"]) or r1["(4.3) from"] > 90
    assert r2["eta/s* (late)"] == pytest.approx(1 / s_star(CFG))  # the rival reading s = 1
    o = optimality_estimates(opt, 2)
    assert o["n"] == 3 and o["eta_all"].value == pytest.approx(np.median(opt["eta/s* (late)"]))
    assert o["n_stage1"] == 3 and o["eta"].lo == -math.inf  # three runs cannot bound a median
    order = settle_order_estimate(opt)
    both = opt.dropna(subset=["(4.3) from", "Stage II"])
    assert order.value == pytest.approx((both["(4.3) from"] <= both["Stage II"]).mean())
    with pytest.raises(ValueError, match="H=4"):
        optimality_estimates(opt, 4)
    assert SETTLE_TOL == 0.1
