"""Chapter 9's trap sweep (icl_lib.paper1.phase_diagram.trap) and why a seed ends in it (phase_diagram.mechanism)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib.config import DataConfig
from icl_lib.sampling import sample_batch
from icl_lib.seeding import generator
from icl_lib.paper1.phase_diagram import mechanism as td, trap
from icl_lib.paper1.approx_loss import ApproxLossConfig, approx_loss
from icl_lib.paper1.phase_diagram.grid import Cell
from icl_lib.stats import diff_seeds_to_decide, proportion_ci, seeds_for_interval, seeds_to_decide
from icl_lib.parameters import renamed


def test_the_sweep_crosses_the_rates_for_one_head_count_and_gives_the_anchors_more_seeds():
    sw = trap.TrapSweep(heads=(2, 3), init_scales=(1.0, 0.1, 0.01), lrs=(1e-3, 3e-3), seeds=4, anchor_seeds=6)
    plan = sw.plan()
    assert sw.lr_heads == 2  # the first head count
    assert list(plan.items()) == [
        (Cell(2, 5, 40, 0.1, 1e-3, 1.0), 6), (Cell(2, 5, 40, 0.1, 1e-3, 0.1), 4), (Cell(2, 5, 40, 0.1, 1e-3, 0.01), 6),
        (Cell(2, 5, 40, 0.1, 3e-3, 1.0), 6), (Cell(2, 5, 40, 0.1, 3e-3, 0.1), 4), (Cell(2, 5, 40, 0.1, 3e-3, 0.01), 4),
        (Cell(3, 5, 40, 0.1, 1e-3, 1.0), 6), (Cell(3, 5, 40, 0.1, 1e-3, 0.1), 4), (Cell(3, 5, 40, 0.1, 1e-3, 0.01), 6)]
    one = trap.TrapSweep(heads=(4,), init_scales=(0.5,), lrs=(1e-3,), seeds=2, anchor_seeds=3)
    assert one.plan() == {Cell(4, 5, 40, 0.1, 1e-3, 0.5): 3}


def test_the_profiles_sweeps_and_their_runs():
    paper = trap.trap_sweep("paper")
    # 7 anchor cells of 128 seeds (two to four heads at the first and the smallest scale, two heads at
    # the second rate), 9 cells of 64
    assert sum(paper.plan().values()) == 7 * 128 + 9 * 64 and len(paper.plan()) == 16
    specs = trap.trap_specs(paper, "paper")
    assert len(specs) == 7 * 128 + 9 * 64 and {s.train.steps for s in specs} == {20_000} and min(s.seed for s in specs) == 1000
    assert {s.train.lr for s in specs} == {1e-3, 3e-3} and {s.model.init_scale for s in specs} == {1.0, 0.3, 0.1, 0.03}
    quick = trap.trap_specs(trap.trap_sweep("quick"), "quick", seed=7, steps=300)
    assert len(quick) == 5 * 16 + 8 and {s.train.steps for s in quick} == {300} and min(s.seed for s in quick) == 7
    assert trap.trap_sweep("quick", seeds=3, anchor_seeds=None).seeds == 3
    cfg = trap.horizon_config("paper")
    assert (cfg.steps, cfg.batch, cfg.optimizer, cfg.n_log, cfg.val_size) == (20_000, 256, "adam", 160, 2048)


@pytest.mark.parametrize("kw, name", [({"heads": (1,)}, "heads"), ({"heads": (2, 2)}, "heads"),
                                      ({"init_scales": (0.0,)}, "init_scales"), ({"lrs": (0.5,)}, "lrs"),
                                      ({"seeds": 1}, "seeds"), ({"seeds": 8, "anchor_seeds": 4}, "anchor_seeds"),
                                      ({"lr_heads": 5}, "lr_heads")])
def test_a_bad_sweep_is_refused_by_name(kw, name):
    with pytest.raises(ValueError, match=rf"^{name}(\[\d+\])?="):
        trap.TrapSweep(**kw)
    with pytest.raises(ValueError, match=r"^steps="):
        trap.horizon_config("paper", steps=10)
    with pytest.raises(ValueError, match=r"^profile="):
        trap.trap_sweep("fast")


def test_renamed_reports_the_chapters_name():
    with pytest.raises(ValueError, match=r"^trap_heads\[0\]=1 is invalid"):
        with renamed(heads="trap_heads"):
            trap.TrapSweep(heads=(1,))
    with pytest.raises(ValueError, match=r"^seeds=1 is invalid"):  # a name not renamed stays
        with renamed(heads="trap_heads"):
            trap.TrapSweep(seeds=1)


def test_seeds_to_decide_keeps_the_fraction_and_finds_the_first_deciding_size():
    assert seeds_to_decide(24, 24, 0.9) == 36  # all seeds in the pattern: 0.025 ** (1 / n) > 0.9 from n = 36
    assert proportion_ci(36, 36).lo > 0.9 > proportion_ci(35, 35).lo
    n = seeds_to_decide(9, 12, 0.9)  # 3 of 12 trapped: the upper end falls below 0.9
    assert 12 < n < 60
    assert seeds_to_decide(0, 3, 0.9) == 3  # already decided
    assert seeds_to_decide(9, 10, 0.9) is None  # the fraction sits on the threshold
    n = diff_seeds_to_decide(6, 12, 1, 12)
    assert n is not None and n >= 12
    assert diff_seeds_to_decide(3, 12, 3, 12) is None


def test_trap_given_and_the_auc():
    models = pd.DataFrame({"pattern": [False, False, True, True, True, True],
                           "same sign": [True, True, True, False, False, False]})
    e = trap.trap_given(models, "same sign")
    assert e.value == pytest.approx(2 / 3) and e.lo < e.value < e.hi
    assert math.isinf(trap.trap_given(models[models["same sign"]], "same sign").hi)  # one group empty
    assert trap.rank_auc([3, 2, 1, 0.5], [True, True, False, False]) == 1.0
    assert trap.rank_auc([0, 1, 2, 3], [True, True, False, False]) == 0.0
    assert math.isnan(trap.rank_auc([1, 2], [True, True]))


def test_at_omega_zero_the_kq_scales_grow_with_the_sign_of_their_own_ov_scale():
    """The mechanism chapter 9 reads from (4.1): d/d omega at omega = 0 is -2 mu, exactly."""
    cfg = ApproxLossConfig(5, 40, 0.1)
    mu = torch.tensor([0.2, -0.05], dtype=torch.float64)
    omega = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(approx_loss(mu, omega, cfg), omega)
    assert torch.allclose(g, -2 * mu)
    axis, gd = td.basin(lambda m, w: td.approx_adam(m, w, cfg, 1e-2, 2000), 0.2, n=9)
    one = np.sign(axis[:, None]) == np.sign(axis[None, :])
    off_axes = (axis[:, None] != 0) & (axis[None, :] != 0)
    assert not gd[one & off_axes].any() and gd[~one & off_axes].all()


def test_end_pattern_reads_both_signs_among_the_live_heads():
    omega = np.array([[0.5, -0.4], [0.5, 0.4], [0.5, -0.01]])
    mu = np.array([[2.0, -1.5], [2.0, 1.5], [2.0, -0.01]])  # last: a dummy negative head
    assert td.end_pattern(mu, omega).tolist() == [True, False, False]


def test_the_restricted_loss_is_the_circuit_loss_of_the_form_3_1():
    data = DataConfig(d=4, L=12, sigma2=0.1)
    b = sample_batch(data, 200, 3, dtype=torch.float64)
    omega, mu = torch.tensor([[0.7, -0.3]], dtype=torch.float64), torch.tensor([[1.2, -0.8]], dtype=torch.float64)
    D = 5
    kq = torch.zeros(2, D, 4, dtype=torch.float64)
    kq[:, range(4), range(4)] = omega[0, :, None]
    ov = torch.zeros(2, D, dtype=torch.float64)
    ov[:, 4] = mu[0]
    theta = torch.cat([kq.reshape(-1), ov.reshape(-1)])
    args = (b.x, b.y[..., 0], b.xq, b.yq[..., 0])
    assert torch.allclose(td.restricted_loss(mu, omega, *args)[0], td.circuit_loss(theta, 2, 4, *args))
    m, w = td.restricted_adam(np.array([[0.1, 0.1]]), np.array([[0.01, 0.01]]), data, 1e-2, 30, batch=32, seed=1)
    assert m.shape == w.shape == (1, 2) and np.isfinite(m).all()


@pytest.mark.parametrize("H", [1, 2, 3])
def test_the_closed_form_hessian_is_autograds(H):
    data = DataConfig(d=3, L=10, sigma2=0.2)
    b = sample_batch(data, 150, H, dtype=torch.float64)
    args = (H, 3, b.x, b.y[..., 0], b.xq, b.yq[..., 0])
    theta = torch.randn(H * (4 * 3 + 4), dtype=torch.float64, generator=torch.Generator().manual_seed(H)) * 0.5
    want_h = torch.autograd.functional.hessian(lambda p: td.circuit_loss(p, *args), theta)
    want_g = torch.func.grad(td.circuit_loss)(theta, *args)
    g, h = td.circuit_derivatives(theta, *args)
    assert torch.allclose(g, want_g, atol=1e-12) and torch.allclose(h, want_h, atol=1e-11)


def test_circuit_hessian_finds_a_minimum_and_a_saddle():
    """At the loss's minimiser over OV (KQ = 0: uniform attention, a linear least-squares problem in
    OV) the OV block is positive definite; the returned interval brackets the smallest eigenvalue."""
    data = DataConfig(d=2, L=6, sigma2=0.1)
    KQ = torch.zeros(1, 3, 3, dtype=torch.float64)
    OV = torch.zeros(1, 1, 3, dtype=torch.float64)
    OV[0, 0, 2] = 0.3
    out = td.circuit_hessian(KQ, OV, data, n=2000, batches=4, seed=0, boot=200)
    e = out["lam_min"]
    assert e.lo <= e.value <= e.hi + 1e-12 and len(out["eig"]) == 3 * 2 + 3
    assert out["vec"].shape == (9, 9) and out["grad_norm"] >= 0 and out["grad_se"] >= 0
    with pytest.raises(ValueError, match=r"^batches="):
        td.circuit_hessian(KQ, OV, data, n=2000, batches=1, seed=0)


def test_gradient_descent_from_end_points_leaves_a_saddle_and_settles_at_a_minimum():
    """On the true loss of one head over OV alone (KQ = 0: a least-squares problem), descent from
    a point off the minimiser reaches it and settles; the batched loss is circuit_loss's; a kick
    moves a point by its stated share in both senses."""
    from icl_lib.paper1.phase_diagram import stationarity as ts

    data = DataConfig(d=2, L=6, sigma2=0.1)
    b = sample_batch(data, 400, generator(0, "t"), dtype=torch.float64)
    thetas = torch.randn(3, 2 * 3 + 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.3
    args = (b.x, b.y[..., 0], b.xq, b.yq[..., 0])
    want = torch.stack([td.circuit_loss(t, 1, 2, *args) for t in thetas])
    assert torch.allclose(ts.batched_loss(thetas, 1, 2, *args), want, atol=1e-12)
    KQ, OV = ts.theta_circuits(thetas[0], 1, 2)
    assert torch.equal(ts.circuit_theta(KQ, OV, 2), thetas[0])
    start = np.zeros((1, 9))
    start[0, 6 + 2] = 2.0  # mu far from its optimum, KQ = 0
    out = ts.descend(start, [0.2], 1, data, steps=400, batch=256, seed=0)
    assert out["loss"][-1, 0] < out["loss"][0, 0] and not out["diverged"].any()
    check = ts.gradient_check(out["theta"], 1, data, n=2000, batches=4, seed=1)
    assert check["settled"].all() and (check["se"] > 0).all()
    k = ts.kicked(start, np.ones((1, 9)), 0.1)
    assert k.shape == (2, 9) and np.allclose(np.linalg.norm(k - start, axis=1), 0.1 * np.linalg.norm(start))
    assert ts.end_outcomes(thetas, 1, 2).shape == (3,)
    with pytest.raises(ValueError, match=r"^steps_size="):
        ts.descend(start, [-1.0], 1, data, steps=10, batch=64, seed=0)


def test_seeds_for_interval_shrinks_as_one_over_root_n():
    from icl_lib.stats import Estimate
    assert seeds_for_interval(Estimate(0.06, 0.02, 0.10), 0.05, 8) in (128, 129)  # 8 (0.04 / 0.01) ** 2
    assert seeds_for_interval(Estimate(0.05, 0.02, 0.08), 0.05, 8) is None
    assert seeds_for_interval(Estimate(0.2, 0.15, 0.25), 0.05, 8) == 8  # already decided
