"""What decides the trap (icl_lib.paper1.phase_diagram.attribution) and the dynamics at the trapped end points
(icl_lib.paper1.phase_diagram.stationarity), on hand-made outcome matrices and hand-built circuits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_lib import DataConfig
from icl_lib.paper1.phase_diagram import stationarity as ts
from icl_lib.paper1.phase_diagram.attribution import axis_law, init_ceiling, predictor_vs_ceiling, switch_effects
from icl_lib.stats import bootstrap_ci


def test_an_outcome_fixed_by_the_initialisation_is_predicted_from_it():
    M = np.array([[1, 1, 1]] * 5 + [[0, 0, 0]] * 5, dtype=bool)  # each row: one initialisation's streams
    c = init_ceiling(M, seed=1)
    assert c["loo"].value == 1.0 and c["plugin"] == 1.0 and c["agree"] == 1.0
    pred = M[:, 0]
    assert predictor_vs_ceiling(pred, M)["accuracy"].value == 1.0
    assert predictor_vs_ceiling(pred, M)["gap"].value == 0.0
    assert predictor_vs_ceiling(~pred, M)["accuracy"].value == 0.0


def test_an_outcome_set_by_the_data_is_not():
    M = np.array([[1, 0]] * 6 + [[0, 1]] * 6, dtype=bool)  # every initialisation splits its two streams
    c = init_ceiling(M, seed=1)
    assert c["plugin"] == 0.5 and c["agree"] == 0.0
    assert c["loo"].value == 0.0  # the other stream always says the opposite
    with pytest.raises(ValueError, match="^M="):
        init_ceiling(M[:, :1])
    with pytest.raises(ValueError, match="^pred="):
        predictor_vs_ceiling(np.ones(3, bool), M)


def test_a_switch_is_measured_against_the_datas_own_changes():
    base = np.array([[1, 1, 0]] * 4 + [[0, 0, 1]] * 4, dtype=bool)  # the first two streams agree
    same = switch_effects(base, base[:, :2].copy(), seed=2)
    assert same["changed"].value == 0.0 and same["rate"].value == 0.0
    flipped = switch_effects(base, ~base[:, :2], seed=2)
    assert flipped["changed"].value == 1.0 and flipped["shares"]["switch changes"] == 1.0
    all_trapped = switch_effects(base, np.ones((8, 2), bool), seed=2)
    assert all_trapped["rate"].value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="^switched="):
        switch_effects(base, np.ones((7, 2), bool))


def test_the_axis_law_reads_a_rising_trap_rate_as_a_positive_difference():
    rng = np.random.default_rng(0)
    x = np.repeat([1.0, 2.0, 3.0, 4.0], 200)
    y = rng.random(x.size) < np.repeat([0.1, 0.3, 0.5, 0.7], 200)
    law = axis_law(x, y)
    assert law["slope"].lo > 0 and law["delta"].lo > 0.4 and law["delta"].hi < 0.8
    assert law["cells"]["runs"].tolist() == [200] * 4
    wide = law["delta"].at(0.99)
    assert wide.lo < law["delta"].lo and wide.hi > law["delta"].hi  # its own interval at another level
    with pytest.raises(ValueError, match="^x="):
        axis_law([1.0, 1.0], [True, False])


def test_the_bootstrap_resamples_whole_units_and_keeps_its_distribution():
    rows = np.array([[1.0, 1.0]] * 10 + [[0.0, 0.0]] * 10)
    e = bootstrap_ci([rows], lambda r: float(r.mean()), "mean", seed=3)
    assert e.value == 0.5 and e.lo < 0.5 < e.hi and "over 20 units" in e.what
    assert e.at(0.5).hi - e.at(0.5).lo < e.hi - e.lo  # another level from the same resamples
    assert bootstrap_ci([rows], lambda r: float(r.mean()), "mean", seed=3) == e  # seeded
    with pytest.raises(ValueError, match="^data="):
        bootstrap_ci([rows, rows[:3]], lambda a, b: 0.0, "x")


def test_circuit_coordinates_round_trip_and_a_kick_moves_by_its_share_of_the_norm():
    H, d = 2, 3
    KQ = torch.randn(H, d + 1, d + 1, dtype=torch.float64)
    KQ[..., d] = 0  # the column that never meets the query
    OV = torch.randn(H, 1, d + 1, dtype=torch.float64)
    theta = ts.circuit_theta(KQ, OV, d)
    assert theta.shape == (H * (d + 1) * d + H * (d + 1),)
    KQ2, OV2 = ts.theta_circuits(theta, H, d)
    torch.testing.assert_close(KQ2, KQ) and torch.testing.assert_close(OV2, OV)
    th = theta.numpy()[None]
    out = ts.kicked(th, np.ones_like(th), 0.1)
    assert out.shape == (2, th.shape[1])
    np.testing.assert_allclose(np.linalg.norm(out - np.concatenate([th, th]), axis=1), 0.1 * np.linalg.norm(th))
    with pytest.raises(ValueError, match="^size="):
        ts.kicked(th, th, 0.0)


def test_descent_lowers_the_loss_and_the_gradient_check_sees_a_moving_point():
    data = DataConfig(d=3, L=12, sigma2=0.1)
    H, d = 2, 3
    gen = torch.Generator().manual_seed(0)
    theta0 = (0.3 * torch.randn(2, H * (d + 1) * d + H * (d + 1), generator=gen, dtype=torch.float64)).numpy()
    out = ts.descend(theta0, [0.05, 0.05], H, data, steps=200, batch=256, seed=1)
    assert out["loss"].shape[1] == 2 and not out["diverged"].any()
    assert (out["loss"][-5:].mean(0) < out["loss"][:5].mean(0)).all()
    g = ts.gradient_check(theta0, H, data, n=2000, batches=4, seed=2)
    assert g["norm"].shape == (2,) and (g["norm"] > 2 * g["se"]).all() and not g["settled"].any()
    with pytest.raises(ValueError, match="^steps_size="):
        ts.descend(theta0, [0.05], H, data, steps=2, batch=16, seed=1)
