"""Chapter 6's helpers: its parameters, runs, losses and tables (icl_lib.paper1.anisotropic)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import icl_lib as icl
from icl_lib.setups.base import split
from icl_lib.engine import train_groups
from icl_lib.paper1.anisotropic.runs import check_eval_lengths, check_rhos, pos_neg_runs, rho_specs, training_summary
from icl_lib.paper1.anisotropic.learned import (
    circuit_table,
    distance_sweep,
    head_split_histories,
    inverse_distances,
    preconditioner_values,
    scaled_inverse_blocks,
    split_floor,
)
from icl_lib.paper1.anisotropic.model_losses import length_losses
from icl_lib.paper1.anisotropic.preconditioner import (
    optimal_pgd_risk,
    optimal_preconditioner,
    pgd_risk,
    reference_values,
    risk_check,
)
from tests.paper1.anisotropic_common import _mirror_circuits, _optimal_model_run, _run, kms



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
    assert check_eval_lengths("eval_L", [10, 2, 640]) == (10, 2, 640)
    assert check_eval_lengths("eval_L", "[40, 80]") == (40, 80)
    assert check_eval_lengths("eval_L", 40) == check_eval_lengths("eval_L", 40.0) == (40,)
    for values, match in (([], r"^eval_L=\[\]"), ([1], r"^eval_L\[0\]=1 is"), ([10, 641], r"^eval_L\[1\]=641"),
                          ([10] * 13, r"^eval_L=\[10,"), (True, r"^eval_L=True"), ([2.5], r"^eval_L\[0\]=2.5"),
                          ("[40", r"^eval_L='\[40'"), ("40", r"^eval_L='40'"), (None, r"^eval_L=None"),
                          ("[1]", r"^eval_L\[0\]=1 ")):
        with pytest.raises(ValueError, match=match):
            check_eval_lengths("eval_L", values)


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


def _rho_sweep(rhos, cfg):
    """The correlation sweep as chapter 6 trains it: its specs as ``{rho: specs}``, one call of the engine."""
    return train_groups(split(rho_specs(rhos, 2, 3, 3, 6, 0.1, cfg), rhos, 2), device="cpu")


def test_rho_sweep_trains_every_rho_and_seed_then_loads_them():
    """{rho: runs} in the order asked, two heads, run seeds seed..seed+seeds-1; the summary line counts
    models and model-steps and says where the runs came from."""
    cfg = icl.TrainConfig(steps=20, batch=16, n_log=4, val_size=64)
    runs = _rho_sweep((0.5, 0.0), cfg)
    assert list(runs) == [0.5, 0.0]
    for r, rs in runs.items():
        assert [(run.spec.data.rho, run.spec.seed, run.spec.model.heads) for run in rs] == [(r, 3, 2), (r, 4, 2)]
    text = training_summary(runs)
    assert text.startswith("4 models, 80 model-steps; trained as ensembles of 4 models in ")
    assert text.endswith(" s\ntrained now") and max(map(len, text.splitlines())) <= 78
    again = _rho_sweep((0.5, 0.0), cfg)
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
