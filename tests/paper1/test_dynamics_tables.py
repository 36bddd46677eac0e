"""Chapter 3: gradient descent on (4.1), groups of runs and the chapter's tables (icl_lib.paper1.dynamics)."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.integrate import solve_ivp

from icl_lib.paper1.approx_loss import approx_loss, kernel_matrix
from icl_lib.paper1.dynamics.approx_descent import ApproxGDConfig, approx_gd, approx_hessian, group_labels, same_groups
from icl_lib.paper1.dynamics.observations import observation_summary, observation_table
from icl_lib.paper1.dynamics.stage_detection import (
    check_stage_heads,
    history_grid,
    shown_seed,
    stage_statistics,
    stage_table,
    sweep_stages,
)
from tests.paper1.dynamics_common import CFG, POSNEG_MU, POSNEG_OMEGA, SINGLE_MU, SINGLE_OMEGA, fake_run, fake_sweep



# ----------------------------------------------------------------------------- gradient descent on (4.1)
def test_first_gd_step_matches_autograd(gen):
    mu0 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    omega0 = 0.2 * torch.randn(3, 4, generator=gen, dtype=torch.float64)
    out = approx_gd(mu0, omega0, CFG, ApproxGDConfig(lr=0.01, steps=1, n_log=2))
    mu, om = mu0.clone().requires_grad_(), omega0.clone().requires_grad_()
    approx_loss(mu, om, CFG).sum().backward()
    np.testing.assert_allclose(out["mu"][1], (mu0 - 0.01 * mu.grad).numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["omega"][1], (omega0 - 0.01 * om.grad).numpy(), rtol=1e-12, atol=1e-14)
    assert out["step"].tolist() == [0, 1] and out["loss"].shape == (2, 3)


def reduced_rhs(t, y, d, L, s2):
    """Symmetric two-head flow (dm/dt, dw/dt), written out by hand from
    1 + s2 - 4 m w + 4 m^2 w^2 + 4 c m^2 sinh(d w^2) with dm/dt = -(1/2) dL/dm."""
    m, w = y
    c = (1 + s2) / L
    return [2 * w - 4 * m * w**2 - 4 * c * m * math.sinh(d * w**2),
            2 * m - 4 * m**2 * w - 4 * c * d * m**2 * w * math.cosh(d * w**2)]


def test_small_step_gd_follows_the_gradient_flow():
    eps, lr, steps = 1e-2, 2e-4, 30_000  # time lr * steps = 6, through the growth phase
    out = approx_gd(np.array([eps, -eps]), np.array([eps, -eps]), CFG, ApproxGDConfig(lr=lr, steps=steps, n_log=40))
    # the symmetric set is preserved exactly
    np.testing.assert_allclose(out["mu"][:, 0], -out["mu"][:, 1], rtol=1e-12)
    np.testing.assert_allclose(out["omega"][:, 0], -out["omega"][:, 1], rtol=1e-12)
    t = out["step"] * lr
    ref = solve_ivp(reduced_rhs, (0, t[-1]), [eps, eps], t_eval=t, method="DOP853", rtol=1e-11, atol=1e-13,
                    args=(5, 40, 0.1))
    np.testing.assert_allclose(out["mu"][:, 0], ref.y[0], rtol=0.02, atol=1e-4)
    np.testing.assert_allclose(out["omega"][:, 0], ref.y[1], rtol=0.02, atol=1e-4)
    assert np.all(np.diff(out["loss"]) <= 1e-12)  # small steps: the loss never increases


def test_gd_diverges_loudly():
    with pytest.raises(FloatingPointError, match="lr=5"):
        approx_gd(np.array([3.0, -3.0]), np.array([1.0, -1.0]), CFG, ApproxGDConfig(lr=5.0, steps=200))


def test_gd_config_is_validated():
    with pytest.raises(ValueError, match="steps=0"):
        ApproxGDConfig(steps=0)
    with pytest.raises(ValueError, match="lr=-1"):
        ApproxGDConfig(lr=-1)
    with pytest.raises(ValueError, match="mu0.shape"):
        approx_gd(np.zeros(3), np.zeros(2), CFG)


def test_approx_hessian_mu_block_is_twice_the_kernel_matrix():
    mu, omega = np.array([1.0, -0.5, 0.2]), np.array([0.3, -0.1, 0.4])
    Hs = approx_hessian(mu, omega, CFG)
    torch.testing.assert_close(Hs[:3, :3], 2 * kernel_matrix(torch.tensor(omega), CFG), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(Hs, Hs.T)


# ----------------------------------------------------------------------------- groups
def test_group_labels_and_same_groups():
    g = group_labels([0.2, -0.2, 0.01, 0.19], [2.0, -2.1, 0.05, 1.0])
    assert g == ["positive", "negative", "dummy", "positive"]
    assert group_labels([0.3], [1.0]) == ["positive"]  # one head is never dummy
    assert same_groups(g, g) == (True, False)
    flipped = ["negative", "positive", "dummy", "negative"]
    assert same_groups(g, flipped) == (True, True)
    other = ["negative", "positive", "positive", "negative"]
    assert same_groups(g, other) == (False, False)
    assert same_groups(flipped, other, heads=[True, True, False, True]) == (True, False)
    with pytest.raises(ValueError, match="len"):
        same_groups(g, g[:3])


def test_gd_stops_at_a_divergence_when_asked():
    mu0, omega0 = np.array([3.0, -3.0]), np.array([1.0, -1.0])
    gd = ApproxGDConfig(lr=5.0, steps=200)
    out = approx_gd(mu0, omega0, CFG, gd, on_divergence="stop")
    assert out["diverged"] is not None and out["diverged"] in gd.log_steps()
    assert out["step"][-1] < out["diverged"]  # the history ends at the last finite logged step
    assert np.isfinite(out["mu"]).all() and np.isfinite(out["omega"]).all()
    np.testing.assert_array_equal(out["mu"][0], mu0)
    assert approx_gd(mu0, omega0, CFG, ApproxGDConfig(lr=1e-3, steps=10), on_divergence="stop")["diverged"] is None
    with pytest.raises(ValueError, match="on_divergence='ignore'"):
        approx_gd(mu0, omega0, CFG, gd, on_divergence="ignore")


@pytest.mark.parametrize("heads, want", [(3, [3]), ([4, 2, 4], [2, 4]), ("[4]", [4]), ("2", [2]),
                                         ("[2, 8]", [2, 8]), ((2,), [2])])
def test_check_stage_heads_accepts_ints_lists_and_their_text(heads, want):
    assert check_stage_heads(heads) == want


@pytest.mark.parametrize("heads", [1, 9, [], [2, 1], "x", "[2,", True, [2.5], None, "[]"])
def test_check_stage_heads_rejects_naming_heads(heads):
    with pytest.raises(ValueError, match=r"^heads="):
        check_stage_heads(heads)


def test_stage_table_and_statistics_of_a_designed_sweep():
    sweep = fake_sweep()
    stages = sweep_stages(sweep, 5)
    assert [st.kind for st in stages[2]] == ["pos/neg", "single-sign"]
    table = stage_table(sweep, stages, [2])
    assert table.columns.tolist() == ["H", "seed", "final pattern", "groups", "(3.1) first", "pattern (3.1)", "Stage I",
                                      "Stage II"]
    assert table["(3.1) first"].tolist() == [0, 0]  # the first logged step of the form (3.1)
    assert table["seed"].tolist() == [0, 1] and table["groups"].tolist() == ["p n", "p p"]
    assert table["Stage I"].iloc[0] == 20 and table["Stage II"].iloc[0] == 30
    assert table["pattern (3.1)"].tolist() == [0, 0]  # the circuits are of the form (3.1) throughout
    assert np.isnan(table["Stage I"].iloc[1]) and np.isnan(table["Stage II"].iloc[1])
    v = stage_statistics(table, last=40)
    assert v["kept_all"] and v["median_shape"] == 0.0
    assert v["n_both"] == 1 and v["order_frac"] == 1.0 and v["n_strict"] == 1
    assert v["both_frac"] == {2: 0.5} and len(v["late"]) == 0


def test_stage_statistics_against_hand_counts():
    nan = float("nan")
    table = pd.DataFrame({"H": [2, 2, 4, 4], "seed": [0, 1, 0, 1], "pattern (3.1)": [10, 40, 20, 30],
                          "Stage I": [5, 50, nan, 30], "Stage II": [8, 40, 70, 30]})
    v = stage_statistics(table, last=100)
    assert v["kept_all"] and v["median_shape"] == 25.0
    assert v["n_both"] == 3 and v["n_strict"] == 1 and v["order_frac"] == pytest.approx(2 / 3)
    assert v["both_frac"] == {2: 1.0, 4: 0.5}
    assert v["late"]["pattern (3.1)"].tolist() == [40, 30]
    table.loc[0, "pattern (3.1)"] = nan
    assert not stage_statistics(table, 100)["kept_all"] and np.isnan(stage_statistics(table, 100)["median_shape"])
    none = stage_statistics(table.assign(**{"Stage I": nan}), 100)
    assert none["n_both"] == 0 and np.isnan(none["order_frac"]) and none["both_frac"] == {2: 0.0, 4: 0.0}


def test_shown_seed_and_history_grid():
    def summary(groups):
        return SimpleNamespace(groups=groups)
    two = [summary(["positive", "negative"])] * 3
    assert shown_seed(two) == 0
    four = [summary(["positive"] * 2 + ["negative"] * 2), summary(["positive", "dummy", "negative", "negative"])]
    assert shown_seed(four) == 1
    assert shown_seed(four[:1]) == 0  # no dummy head: the first seed
    run = fake_run(0, SINGLE_OMEGA, SINGLE_MU, steps=[0, 1, 2, 6, 10])
    assert history_grid(run) == {"n_log": 5, "steps": 10, "log_gap": 4.0}


def test_observation_table_against_a_plain_loop():
    sweep = fake_sweep()
    obs = observation_table(sweep, sweep_stages(sweep, 5), [2])
    assert obs["seed"].tolist() == [0, 0]  # only the positive/negative run, both heads live
    w, m = np.abs(np.array(POSNEG_OMEGA)), np.abs(np.array(POSNEG_MU))
    for h in range(2):
        row = obs.iloc[h]
        assert row["omega rise"] == pytest.approx(w[:, h].max() / w[0, h])
        assert row["omega drop"] == pytest.approx(1 - w[-1, h] / w[:, h].max())
        assert row["omega peak step"] == 10 * int(np.argmax(w[:, h]))
        assert row["mu final/max"] == pytest.approx(1.0) and row["mu final/mid"] == pytest.approx(m[-1, h] / m[2, h])
        assert row["group mu final/max"] == pytest.approx(1.0)  # one head per group
    assert obs["omega rises then falls"].tolist() == [True, True]  # 0.5 / 0.05 >= 2 and drop 0.4 >= 0.1
    assert obs["mu rises (head)"].all() and obs["mu rises (group)"].all()
    s = observation_summary(obs)
    assert s.loc[2, "heads"] == 2 and s.loc[2, "omega rises then falls"] == 1.0


def test_observation_summary_fractions_and_no_rows():
    obs = pd.DataFrame({"H": [2, 2, 4, 4, 4], "omega rises then falls": [True, False, True, True, False],
                        "mu rises (head)": [True] * 5, "mu rises (group)": [True, True, True, False, True]})
    s = observation_summary(obs)
    assert s["omega rises then falls"].tolist() == [0.5, pytest.approx(2 / 3)]
    assert s["mu rises (group)"].tolist() == [1.0, pytest.approx(2 / 3)] and s["heads"].tolist() == [2, 3]
    none = {2: [fake_run(1, SINGLE_OMEGA, SINGLE_MU)]}  # no positive/negative run: an empty table
    empty = observation_table(none, sweep_stages(none, 5), [2])
    assert len(empty) == 0 and len(observation_summary(empty)) == 0
    assert len(empty[~empty["omega rises then falls"] | ~empty["mu rises (head)"]]) == 0
