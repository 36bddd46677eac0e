"""Measurements for paper 2 (icl_lib.paper2.analysis, icl_lib.paper2.experiments): fits against scipy and
exact curves, the manifold of minima and the distance to it, experiment settings."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from icl_lib.paper2.analysis import (
    balance,
    drift_z,
    geometric_rate,
    growth_rate,
    loglog_fit,
    manifold_distance,
    manifold_point,
    saddle_curvature,
    slope_over_repetitions,
    wls,
)
from icl_lib.paper2.data import P2Config, haar_orthogonal, make_problem
from icl_lib.paper2.experiments import ch8_settings, escape_time
from icl_lib.paper2.loss import P_matrix, excess_loss, population_grad, regulariser, stack_theta

DT = torch.float64


@pytest.fixture
def problem():
    return make_problem(P2Config(d=3, p=4, kappa=5.0, m_op=0.05, kappa_M=3.0), R=2, seed=4)


def test_make_problem_meets_the_assumptions(problem):
    ops = torch.linalg.matrix_norm(problem.M @ problem.Sigma_half, 2)
    torch.testing.assert_close(ops, torch.full_like(ops, 0.05))
    torch.testing.assert_close(torch.linalg.cond(problem.Sigma), torch.full((2,), 5.0, dtype=DT))
    torch.testing.assert_close(problem.Sigma_half @ problem.Sigma_half, problem.Sigma)
    sv = torch.linalg.svdvals(problem.M_tilde)
    torch.testing.assert_close(sv[:, 0] / sv[:, -1], torch.full((2,), 3.0, dtype=DT))


def test_manifold_points_are_global_minima_for_every_rotation(problem, gen):
    J = haar_orthogonal(problem.R, problem.d, problem.d, gen)
    A, B = manifold_point(problem, J)
    assert excess_loss(A, B, problem.M, problem.Sigma).abs().max() < 1e-25
    assert regulariser(A, B, problem.Sigma).abs().max() < 1e-25
    gA, gB = population_grad(A, B, problem.M, problem.Sigma)
    assert max(gA.abs().max(), gB.abs().max()) < 1e-14


@pytest.mark.parametrize("geometry", ["P", "whitened"])
def test_distance_to_the_manifold(problem, gen, geometry):
    J = haar_orthogonal(problem.R, problem.d, problem.d, gen)
    A, B = manifold_point(problem, J)
    d0 = manifold_distance(problem, A, B, geometry)
    assert d0.max() < 1e-6  # the optimiser finds the rotation J
    dA = 0.01 * torch.randn(A.shape, generator=gen, dtype=DT)
    dB = 0.01 * torch.randn(B.shape, generator=gen, dtype=DT)
    d1 = manifold_distance(problem, A + dA, B + dB, geometry)
    if geometry == "P":
        own = (P_matrix(problem.Sigma, problem.p) @ stack_theta(dA, dB) * stack_theta(dA, dB)).sum((1, 2)).sqrt()
    else:
        Sh = problem.Sigma_half
        own = (torch.cat([dA @ Sh, Sh @ dB @ Sh], 1)).pow(2).sum((1, 2)).sqrt()
    assert (d1 <= own + 1e-12).all()  # the distance to S is at most the distance to theta(J)
    assert (d1 > 0.3 * own).all()  # and a random perturbation is mostly normal to S
    # brute force over many random rotations cannot beat the optimiser
    Js = haar_orthogonal(400, problem.d, problem.d, gen)
    for r in range(problem.R):
        pr = problem.member(r)
        Ab, Bb = manifold_point(pr._replace(M=pr.M.expand(400, -1, -1), Sigma=pr.Sigma.expand(400, -1, -1),
                                            Sigma_half=pr.Sigma_half.expand(400, -1, -1),
                                            M_tilde=pr.M_tilde.expand(400, -1, -1)), Js)
        diff = stack_theta(A[r] + dA[r] - Ab, B[r] + dB[r] - Bb)
        if geometry == "P":
            brute = (P_matrix(pr.Sigma.expand(400, -1, -1), problem.p) @ diff * diff).sum((1, 2)).sqrt().min()
        else:
            Sh = pr.Sigma_half[0]
            brute = torch.cat([diff[:, : problem.p] @ Sh, Sh @ diff[:, problem.p :] @ Sh], 1).pow(2).sum((1, 2)).sqrt().min()
        assert d1[r] <= brute + 1e-10


def test_balance_is_the_regulariser(problem, gen):
    A = torch.randn(problem.R, problem.p, problem.d, generator=gen, dtype=DT)
    B = torch.randn(problem.R, problem.d, problem.d, generator=gen, dtype=DT)
    imb, _, nB = balance(problem, A, B)
    torch.testing.assert_close(imb**2 / 8, regulariser(A, B, problem.Sigma))
    torch.testing.assert_close(nB, (problem.Sigma_half @ B @ problem.Sigma_half).norm(dim=(1, 2)))
    assert balance(problem, *manifold_point(problem))[0].max() < 1e-12


def test_loglog_fit_against_scipy_linregress(gen):
    x = np.geomspace(10, 1000, 9)
    rng = np.random.default_rng(0)
    y = 3.0 * x**-0.7 * np.exp(0.05 * rng.standard_normal(9))
    fit = loglog_fit(x, y)
    ref = stats.linregress(np.log(x), np.log(y))
    assert math.isclose(fit.slope, ref.slope, rel_tol=1e-10)
    assert math.isclose(fit.slope_se, ref.stderr, rel_tol=1e-8)
    assert math.isclose(fit.intercept_se, ref.intercept_stderr, rel_tol=1e-8)
    assert math.isclose(fit.r2, ref.rvalue**2, rel_tol=1e-10)


def test_weighted_fit_with_known_errors_recovers_coefficients():
    x = np.linspace(1, 5, 30)
    X = np.stack([np.ones_like(x), x], 1)
    rng = np.random.default_rng(1)
    sig = 0.01 * (1 + x)
    est = []
    for _ in range(300):
        coef, cov, _ = wls(X, 2 - 0.5 * x + sig * rng.standard_normal(30), sig)
        est.append((coef[1] + 0.5) / math.sqrt(cov[1, 1]))
    z = np.array(est)  # standardised errors: mean 0, sd 1 if the covariance is right
    assert abs(z.mean()) < 0.25 and 0.85 < z.std() < 1.15


def test_geometric_rate_of_an_exact_geometric_curve():
    t = torch.arange(401, dtype=DT)
    e = 2e-3 * 0.8**t + 1e-6 * 0.3**t  # a fast transient, then rate 0.8, then round-off
    fit = geometric_rate(torch.clamp(e, min=1e-34))
    assert abs(fit.mu - 0.8) < 1e-8 and fit.r2 > 1 - 1e-12 and fit.t0 > 0
    slow = geometric_rate(1e-3 * 0.999**t)
    assert abs(slow.mu - 0.999) < 1e-10


def test_growth_rate_and_slopes_over_repetitions():
    t = torch.arange(100, dtype=DT)
    v = 1e-8 * 1.3**t
    g = growth_rate(v, 1e-6, 1e-2)
    assert abs(g.mu - 1.3) < 1e-10 and g.t0 == int(np.ceil(np.log(100) / np.log(1.3)))
    x = np.array([10.0, 20, 40, 80])
    Y = np.stack([2 * x**-0.5, 3 * x**-0.7], 1)
    f = slope_over_repetitions(x, Y)
    assert abs(f.slope + 0.6) < 1e-12 and abs(f.slope_se - 0.1) < 1e-12


def test_drift_statistic_separates_a_trend_from_noise():
    rng = np.random.default_rng(2)
    z_flat = [drift_z(rng.standard_normal(200)) for _ in range(200)]
    assert 0.8 < np.std(z_flat) < 1.4 and abs(np.mean(z_flat)) < 0.25
    assert drift_z(np.linspace(0, 1, 200) + 0.1 * rng.standard_normal(200)) > 3  # the chapter's threshold
    with pytest.raises(ValueError, match="^blocks="):
        drift_z(np.zeros(50), blocks=5)


def test_saddle_curvature_is_minus_the_smallest_hessian_eigenvalue_at_zero(problem):
    from icl_lib.paper2.loss import population_Q

    p, d = problem.p, problem.d
    for r in range(problem.R):
        pr = problem.member(r)

        def f(v):
            return population_Q(v[: p * d].reshape(1, p, d), v[p * d :].reshape(1, d, d), pr.M, pr.Sigma, 0.0, False).sum()

        H = torch.autograd.functional.hessian(f, torch.zeros(p * d + d * d, dtype=DT))
        torch.testing.assert_close(-torch.linalg.eigvalsh(H)[0], saddle_curvature(pr)[0])


def test_escape_time():
    e = torch.tensor([[5.0, 5.0], [5.0, 1.0], [2.0, 1.0]])
    assert escape_time(e, 3.0).tolist() == [2, 1]
    assert escape_time(e, 0.1).tolist() == [3, 3]


@pytest.mark.parametrize(
    "override, name",
    [
        ({"kappas": [1, 4]}, "kappas"),
        ({"kappas": [1, 0.5, 4]}, "kappas[1]"),
        ({"floor_multiples": [16, 32]}, "floor_multiples"),
        ({"n_dist": [1, 64, 256]}, "n_dist[0]"),
        ({"init_scales": [1e-1, 2.0, 1e-3]}, "init_scales[1]"),
        ({"K": 0}, "K"),
    ],
)
def test_invalid_settings(override, name):
    with pytest.raises(ValueError) as err:
        ch8_settings("quick", **override)
    assert str(err.value).startswith(f"{name}=") and "accepted" in str(err.value)
    with pytest.raises(ValueError, match="^profile="):
        ch8_settings("auto")
