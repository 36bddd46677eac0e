"""Measurements for paper 2 (icl_lib.paper2.analysis, icl_lib.paper2.experiments): fits against scipy and
exact curves, the manifold of minima and the distance to it, experiment settings."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from icl_lib.paper2.fits import drift_z, geometric_rate, growth_rate, loglog_fit, slope_over_repetitions, wls
from icl_lib.paper2.manifold import balance, manifold_distance, manifold_point, saddle_curvature, saddle_curvatures
from icl_lib.paper2.data import P2Config, haar_orthogonal, make_problem
from icl_lib.setups.convergence import SIZES, ConvergenceSizes
from icl_lib.paper2.experiments import escape_time
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
        # every mode: the d * d negative eigenvalues of the Hessian, largest curvature first
        torch.testing.assert_close(-torch.linalg.eigvalsh(H)[: d * d], saddle_curvatures(pr)[0])


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
        ({"dims": [2, 4]}, "dims"),
        ({"dims": [2, 1, 8]}, "dims[1]"),
        ({"lemma4_r": 0.0}, "lemma4_r"),
        ({"starts_reg": 0}, "starts_reg"),
    ],
)
def test_invalid_settings(override, name):
    with pytest.raises(ValueError) as err:
        ConvergenceSizes(**{**SIZES["quick"], **override})
    assert str(err.value).startswith(f"{name}=") and "accepted" in str(err.value)


# ------------------------------------------------------------------------------ chapter 8's fits and checks
def test_whitened_perturbation_multiplies_the_whitened_entries(problem):
    from icl_lib.paper2.manifold import whitened_perturbation

    A, B = manifold_point(problem)
    Sh = problem.Sigma_half
    gen = torch.Generator().manual_seed(5)
    A1, B1 = whitened_perturbation(problem, A, B, 0.5, gen)
    ref = torch.Generator().manual_seed(5)
    zA = torch.randn(A.shape, generator=ref, dtype=DT)  # A~'s entries first, then B~'s
    zB = torch.randn(B.shape, generator=ref, dtype=DT)
    torch.testing.assert_close(A1 @ Sh, (A @ Sh) * (1 + 0.5 * zA))
    torch.testing.assert_close(Sh @ B1 @ Sh, (Sh @ B @ Sh) * (1 + 0.5 * zB))
    A0, B0 = whitened_perturbation(problem, A, B, 0.0, gen)
    torch.testing.assert_close((A0, B0), (A, B))


def _gap(ns, gaps, se, L=1.0):
    """A loss_gap_vs_n-like result for one point: tensors (len(ns), 1)."""
    g = torch.tensor(gaps, dtype=DT)[:, None]
    return {"n": torch.tensor(ns, dtype=DT), "gap": g, "L_hat": g + L, "se": torch.tensor(se, dtype=DT)[:, None],
            "L": torch.tensor([L], dtype=DT)}


def test_gap_fits_and_extrapolation_on_exact_curves():
    from icl_lib.paper2.experiment_fits import gap_extrapolation, gap_fits

    ns = np.array([8.0, 16, 32, 64, 128, 256])
    exact = 0.09 / ns  # slope -1 for n >= 32; the points below n_min are spoiled and must be left out
    spoiled = np.where(ns < 32, 10 * exact, exact)
    gap = {"a": _gap(ns, spoiled, 1e-4 * np.ones(6)), "b": _gap(ns, 0.2 * ns**-1.5, 1e-4 * np.ones(6))}
    fits = gap_fits(gap, n_min=32)
    assert fits["a"].slope == pytest.approx(-1.0, abs=1e-10) and fits["a"].n_points == 4
    assert fits["b"].slope == pytest.approx(-1.5, abs=1e-10)
    c = {"x": _gap(ns, 2e-5 + 0.09 / ns - 0.3 / ns**2, 1e-5 * np.ones(6))}
    ext = gap_extrapolation(c)["x"]
    assert ext["c0"] == pytest.approx(2e-5, abs=1e-12) and ext["c1"] == pytest.approx(0.09, rel=1e-8)
    # with known errors se(c0) = sqrt((X^T W X)^{-1})_00 does not depend on y
    X = np.stack([np.ones(6), 1 / ns, 1 / ns**2], 1) / 1e-5
    assert ext["c0_se"] == pytest.approx(math.sqrt(np.linalg.inv(X.T @ X)[0, 0]), rel=1e-8)
    assert ext["c0_z"] == pytest.approx(2e-5 / ext["c0_se"], rel=1e-8)


def test_saddle_fit_on_an_exact_escape(problem):
    from icl_lib.paper2.experiment_fits import saddle_fit

    pr = problem.member(0)
    scales = torch.tensor([1e-1, 1e-2, 1e-3, 1e-4], dtype=DT)
    x_log = np.log(1 / scales.numpy())
    t_esc = np.round(5 + 4 * x_log).astype(int)  # slope 4 (up to rounding) over the last three
    t_esc[0] = 1  # the largest start is left out of the fit
    t = torch.arange(60, dtype=DT)
    norms = torch.stack([1e-4 * 1.25**t] * 4)[:, :, None]  # (S, T+1, R): ||theta_t|| of each start
    eta = torch.tensor([0.7], dtype=DT)
    esc = {"scale": scales, "theta_norm": norms, "t_escape": torch.tensor(t_esc)[:, None], "eta": eta,
           "L0": torch.tensor([0.003], dtype=DT), "start_norm": torch.tensor([100.0], dtype=DT)}
    sf = saddle_fit(pr, esc)
    g_pred = 1 + 0.7 * saddle_curvature(pr).item()
    assert sf.g_pred == pytest.approx(g_pred, rel=1e-12) and sf.slope_pred == pytest.approx(1 / math.log(g_pred))
    assert sf.growth.mu == pytest.approx(1.25, rel=1e-10)
    assert sf.growth.t0 == int(np.ceil(np.log(100) / np.log(1.25)))  # from 100 x the start ...
    assert 1e-4 * 1.25**sf.growth.t1 <= 1.0 < 1e-4 * 1.25 ** (sf.growth.t1 + 1)  # ... to 1 % of the start norm
    ref = stats.linregress(x_log[1:], t_esc[1:])
    assert sf.slope == pytest.approx(ref.slope, rel=1e-10) and sf.slope_se == pytest.approx(ref.stderr, rel=1e-8)
    assert sf.t_escape.tolist() == t_esc.tolist() and sf.L0 == 0.003
    g2 = 1 + 0.7 * saddle_curvatures(pr)[0, 1].item()  # the next mode: the rival
    assert sf.g_second == pytest.approx(g2, rel=1e-12) and sf.growth_rival() == pytest.approx(g2 / g_pred)
    assert sf.plateau_rival() == pytest.approx(math.log(g_pred) / math.log(g2)) and sf.plateau_rival() > 1


def test_floor_fit_recovers_the_log_power():
    from icl_lib.paper2.experiment_fits import floor_fit

    n = np.array([64.0, 96, 128, 192, 256])
    F = np.stack([c * n**-2.0 * np.log(n) ** 1.5 for c in (1.0, 1.3)], 1)  # (N, R), k = 1.5
    ff = floor_fit({"n": torch.tensor(n, dtype=DT), "floor": torch.tensor(F, dtype=DT)})
    assert ff.k == pytest.approx(1.5, abs=1e-10)
    assert ff.n_mid == pytest.approx(np.prod(n) ** (1 / 5), rel=1e-12)
    assert ff.slope_bound == pytest.approx(-2 + 6 / math.log(ff.n_mid), rel=1e-12)
    want = np.polyfit(np.log(n), np.log(F[:, 0]), 1)[0]  # both repetitions share the slope
    assert ff.fit.slope == pytest.approx(want, rel=1e-10)
    assert ff.z_two == pytest.approx((ff.fit.slope + 2) / ff.fit.slope_se)


def test_factor_balance_and_method_comparison(problem):
    from types import SimpleNamespace

    from icl_lib.paper2.fits import RateFit
    from dataclasses import asdict

    from icl_lib.paper2.experiments import factor_balance, method_comparison

    pr = problem.member(0)
    A, B = manifold_point(pr)
    G = torch.linalg.svdvals(pr.M_tilde)[0]
    runs = {"alg1": SimpleNamespace(A=A, B=B), "no_reg": SimpleNamespace(A=2 * A, B=B)}
    bal = factor_balance(pr, runs, ("alg1", "no_reg"))
    assert bal["alg1"][0] < 1e-12  # on the manifold of minima the factors are balanced
    assert bal["alg1"][1] == pytest.approx(math.sqrt(G.sum().item()))  # ||A~||_F = ||U G^1/2||_F
    Sh = pr.Sigma_half[0]
    AtA = (2 * A[0] @ Sh).T @ (2 * A[0] @ Sh)
    BtB = (Sh @ B[0] @ Sh).T @ (Sh @ B[0] @ Sh)
    assert bal["no_reg"][0] == pytest.approx((AtA - BtB).norm().item())
    fin = {m: SimpleNamespace(excess_bar=torch.tensor([f]), excess=torch.tensor([[s], [f]]))
           for m, f, s in (("alg1", 2e-5, 1e-4), ("no_reg", 1e-5, 1e-4), ("adam", 3e-5, 1.0))}
    rates = {m: RateFit(mu, 0.0, 0.99, 0, 1) for m, mu in
             (("alg1", 0.8), ("alg1_left", 0.9), ("no_precond", 0.95), ("gd", 0.99), ("adam", 0.9))}
    v = asdict(method_comparison(rates, fin, {"alg1": 0.1, "no_reg": -1.0}, bal))
    assert v["mu_alg1"] == 0.8 and v["r2_alg1"] == 0.99 and v["mu_noprec"] == 0.95 and v["mu_adam"] == 0.9
    assert v["floor_fin"] == pytest.approx(2e-5) and v["start_ratio"] == pytest.approx(5.0)
    assert v["floor_noreg"] == pytest.approx(1e-5) and v["z_noreg"] == -1.0
    assert v["imb_noreg"] == bal["no_reg"][0] and v["B_alg1"] == bal["alg1"][2]
    assert all(isinstance(x, float) for x in v.values()) and len(v) == 17


def test_fits_of_diverged_runs_are_nan_not_errors():
    """A diverged run (NaN, or 1 - mu <= 0) makes chapter 8's fits NaN when asked, instead of raising."""
    from icl_lib.paper2.experiment_fits import floor_fit

    x = np.array([1.0, 4.0, 16.0])
    for bad in ([0.2, np.nan, 0.1], [0.2, -0.01, 0.1]):
        with pytest.raises(ValueError, match="positive values"):
            loglog_fit(x, np.array([0.2, -0.01, 0.1]))
        f = loglog_fit(x, np.array(bad), invalid="nan")
        assert math.isnan(f.slope) and math.isnan(f.slope_se) and f.n_points == 3
        Y = np.stack([0.3 * x**-0.5, np.array(bad)], 1)
        assert math.isnan(slope_over_repetitions(x, Y, invalid="nan").slope)
    good = slope_over_repetitions(x, np.stack([0.3 * x**-0.5, 0.2 * x**-0.5], 1), invalid="nan")
    assert good.slope == pytest.approx(-0.5)
    assert math.isnan(drift_z(np.r_[np.ones(50), np.nan]))
    fl = {"n": torch.tensor([64.0, 128, 256], dtype=DT), "floor": torch.tensor([[1e-4], [np.nan], [1e-5]], dtype=DT)}
    ff = floor_fit(fl)
    assert math.isnan(ff.fit.slope) and math.isnan(ff.k) and ff.slope_bound == pytest.approx(-2 + 6 / math.log(128))


# ------------------------------------------------------------------ the estimates of chapter 8's new claims
def test_floor_drift_separates_a_floor_from_a_falling_curve():
    from icl_lib.paper2.experiment_fits import floor_drift

    g = np.random.default_rng(0)
    flat = 1e-4 * (1 + 0.1 * g.standard_normal((200, 6)))
    e = floor_drift(flat)
    assert e.lo < 0 < e.hi and -0.05 < e.lo and e.hi < 0.05
    falling = 1e-4 * np.exp(-np.arange(200) / 100.0)[:, None] * (1 + 0.01 * g.standard_normal((200, 6)))
    e = floor_drift(falling)
    assert e.hi < -0.5  # the second half is exp(-1) of the first, a drift of about -0.6
    # the value is the mean of the per-problem drifts of the block means, computed directly
    b = falling.reshape(10, 20, 6).mean(1)
    want = ((b[5:].mean(0) - b[:5].mean(0)) / b.mean(0)).mean()
    assert e.value == pytest.approx(want, rel=1e-12)
    # more noise widens the interval instead of making a floor easier to accept
    noisy = 1e-4 * (1 + 2.0 * g.standard_normal((200, 6)))
    assert floor_drift(noisy).hi - floor_drift(noisy).lo > 5 * (floor_drift(flat).hi - floor_drift(flat).lo)
    assert math.isnan(floor_drift(np.r_[flat[:-1], np.full((1, 6), np.nan)]).value)


def test_the_rivals_of_a_floor_and_of_the_limit():
    from icl_lib.paper2.experiment_fits import floor_drift, geometric_drift, limit_rival

    mu, T = 0.9, 200
    curve = np.stack([mu ** np.arange(T, dtype=float)] * 2, 1)  # two problems: floor_drift needs a spread
    assert geometric_drift(mu, T) == pytest.approx(floor_drift(curve).value, rel=1e-12)
    assert geometric_drift(0.5, T) == pytest.approx(-2.0, abs=1e-9)  # no floor at a fast rate
    assert -2.0 < geometric_drift(0.999, T) < 0  # a slow fall drifts less
    with pytest.raises(ValueError, match="^mu="):
        geometric_drift(1.0, T)
    res = {"gap": torch.tensor([[0.4, 9.0], [0.2, 9.0], [0.1, 9.0]], dtype=DT), "L": torch.tensor([2.0, 1.0], dtype=DT)}
    assert limit_rival(res) == pytest.approx(0.05)  # the last n's gap over L, first repetition


def test_one_point_fractions_count_the_random_directions_only():
    from icl_lib.paper2.experiment_fits import one_point_fractions

    r = torch.tensor([0.01, 0.1, 1.0], dtype=DT)
    a = torch.ones(3, 5, dtype=DT)
    b = torch.ones(3, 5, dtype=DT)
    a[0, 1] = 0.4  # a random direction below alpha / 2 at r = 0.01
    a[1, 4] = 0.1  # the last direction is not random: not counted
    a[2, :] = 0.0  # r = 1 is beyond near = 0.1
    b[1, 0] = 2.5
    scan = {"r": r, "a": 0.2 * a, "b": 3.0 * b, "alpha": 0.2, "beta": 3.0, "n_random": 4}
    f = one_point_fractions(scan, near=0.1)
    assert f["convexity"].value == pytest.approx(7 / 8) and f["smoothness"].value == pytest.approx(7 / 8)
    assert f["convexity"].lo < 7 / 8 < f["convexity"].hi
    with pytest.raises(ValueError, match="near"):
        one_point_fractions(scan, near=0.001)


def test_finite_rate_ratio_on_exact_curves():
    from icl_lib.paper2.experiment_fits import finite_rate_ratio

    t = torch.arange(41, dtype=DT)[:, None]
    q = torch.tensor([0.6, 0.7, 0.8], dtype=DT)
    floor = torch.full((3,), 1e-6, dtype=DT)
    pop = 1e-3 * q**t
    same = {"finite": floor + pop, "population": pop, "floor": floor}
    e = finite_rate_ratio(same)
    assert e.value == pytest.approx(1.0, abs=1e-9) and e.hi - e.lo < 1e-6
    half = {"finite": floor + 1e-3 * q**(t / 2), "population": pop, "floor": floor}
    assert finite_rate_ratio(half).value == pytest.approx(0.5, abs=1e-9)
    near = {"finite": 2 * floor + 0 * pop, "population": pop, "floor": floor}  # never 3 x above the floor
    assert math.isnan(finite_rate_ratio(near).value)


def test_one_point_scan_near_the_manifold(problem):
    from icl_lib.paper2.experiments import one_point_scan

    d = problem.d
    scan = one_point_scan(problem, (1e-3, 1e-2, 0.3), 8, seed=2)
    assert scan["null_Q"] == d * (d - 1) // 2 and scan["null_L"] == d * d
    a, b = scan["a"] / scan["alpha"], scan["b"] / scan["beta"]
    # at a small distance a and b are quadratic forms of the Hessian across S: within [alpha, sqrt(beta)]
    # and [lambda_min^2, beta] up to the distance's first-order correction
    assert (a[0] > 1 - 1e-2).all() and (b[0] < 1 + 1e-2).all()
    lam_max = math.sqrt(scan["beta"])
    assert (a[0] < lam_max / scan["alpha"] * (1 + 1e-2)).all()
    # the measured distance is the P-distance to S: at most r (theta(I) is on S), nearly r for a small step
    dist = scan["dist"]
    assert (dist[0] <= 1e-3 * (1 + 1e-9)).all() and (dist[0] > 1e-3 * 0.3).all()
    assert scan["scale"] == pytest.approx(
        float(torch.sqrt(sum(t.pow(2).sum() for t in _p_half(problem, *manifold_point(problem.member(0)))))))


def _p_half(problem, A, B):
    """``P^{1/2} theta`` blocks: ``A`` and ``Sigma^{1/2} B``."""
    return A, problem.member(0).Sigma_half @ B


def test_gradient_bias_per_sequence_gradients_average_to_the_oracle(problem, gen):
    from icl_lib.paper2.monte_carlo import gradient_bias
    from icl_lib.paper2.data import sample
    from icl_lib.paper2.loss import empirical_loss_grad, regulariser_grad

    A, B = manifold_point(problem)
    X, Y = sample(problem, 5, 12, gen)
    gA, gB = empirical_loss_grad(A, B, X, Y)
    sA, sB = empirical_loss_grad(A, B, X, Y, per_sequence=True)
    torch.testing.assert_close(sA.mean(1), gA, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(sB.mean(1), gB, rtol=1e-12, atol=1e-15)
    Sh = X.transpose(-1, -2) @ X / 12
    rA, rB = regulariser_grad(A, B, Sh)
    qA, qB = regulariser_grad(A, B, Sh, per_sequence=True)
    torch.testing.assert_close(qA.mean(1), rA)
    torch.testing.assert_close(qB.mean(1), rB)
    # the squared bias falls with n; the sampling noise it removes is of order 1/K
    g1 = gradient_bias(problem, A, B, 12, 4000, torch.Generator().manual_seed(0))
    g2 = gradient_bias(problem, A, B, 48, 1000, torch.Generator().manual_seed(1))
    assert (g1.b2 > 5 * g1.se).all() and (g2.b2 < g1.b2 / 4).all()
    assert (g1.noise > 0).all()


def test_finite_rate_starts_both_oracles_at_the_stated_distance(problem):
    from icl_lib.paper2.algorithms import RunConfig
    from icl_lib.paper2.experiments import finite_rate

    fr = finite_rate(problem, RunConfig(n=24, n_init=64, K=2, steps=6), 0.3, seed=1)
    torch.testing.assert_close(fr["finite"][0], fr["population"][0])
    assert (fr["start"] <= 0.3 * (1 + 1e-6)).all() and (fr["start"] > 0.1).all()
    assert fr["finite"].shape == (7, problem.R) and (fr["population"][-1] < fr["population"][0]).all()
