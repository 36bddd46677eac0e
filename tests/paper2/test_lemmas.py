"""Paper 2's Lemmas 1, 2 and 4 (icl_lib.paper2.lemmas), the regulariser from random starts
(icl_lib.paper2.regulariser) and the rate against d (icl_lib.paper2.dimension)."""

import math

import pytest
import torch

from icl_lib.paper2.algorithms import RunConfig, run
from icl_lib.paper2.data import P2Config, haar_orthogonal, make_problem
from icl_lib.paper2.dimension import p_for, rate_vs_d
from icl_lib.paper2.experiments import one_point_scan
from icl_lib.paper2.lemmas import (
    lemma1_estimate,
    lemma2_fraction,
    lemma4_instance,
    lemma4_terms,
    lemma_scan,
    symmetry_defect,
    whitened_projection,
)
from icl_lib.paper2.loss import population_grad
from icl_lib.paper2.manifold import manifold_point, manifold_projection, p_norm
from icl_lib.paper2.monte_carlo import sequence_gradients
from icl_lib.paper2.regulariser import PAIR, basin_time_ratio, random_start_runs

DT = torch.float64


@pytest.fixture
def problem():
    return make_problem(P2Config(d=3, p=4, kappa=5.0, m_op=0.05, kappa_M=3.0), R=2, seed=4)


def _exact_projection_point(problem, J, S_sym, N_perp):
    """``theta(J) + Delta`` with ``Delta^T P theta(J) Sigma = S_sym`` (symmetric) plus a part
    ``P^{-1/2} N_perp`` whose columns are P-orthogonal to those of ``P^{1/2} theta(J) Sigma``: the
    first-order condition of the P-projection holds at ``theta(J)`` by construction."""
    A_s, B_s = manifold_point(problem, J)
    p = problem.p
    Sh = problem.Sigma_half
    Y = torch.cat([A_s @ problem.Sigma, Sh @ B_s @ problem.Sigma], -2)  # P^{1/2} theta(J) Sigma, (R, p+d, d)
    YtY = Y.transpose(-1, -2) @ Y
    proj = Y @ torch.linalg.solve(YtY, Y.transpose(-1, -2))
    N = N_perp - proj @ N_perp  # columns orthogonal to Y's
    D = Y @ torch.linalg.solve(YtY, S_sym) + N  # P^{1/2} Delta: D^T Y = S_sym
    dA, dB = D[:, :p], torch.linalg.solve(Sh, D[:, p:])
    return A_s + dA, B_s + dB, A_s, B_s


def test_lemma1_symmetry_holds_at_an_exact_projection_and_not_at_the_whitened_one(problem, gen):
    R, p, d = problem.R, problem.p, problem.d
    J = haar_orthogonal(R, d, d, gen)
    S = torch.randn(R, d, d, generator=gen, dtype=DT)
    S = 1e-3 * (S + S.transpose(-1, -2))
    A, B, A_s, B_s = _exact_projection_point(problem, J, S, 1e-3 * torch.randn(R, p + d, d, generator=gen,
                                                                             dtype=DT))
    assert symmetry_defect(problem, A, B, A_s, B_s).max() < 1e-10
    # the numerical P-projection finds theta(J) and meets the lemma there
    dist, Ap, Bp = manifold_projection(problem, A, B)
    torch.testing.assert_close(dist, p_norm(problem, A - A_s, B - B_s), rtol=1e-7, atol=0)
    torch.testing.assert_close(Ap, A_s, rtol=0, atol=1e-9)
    assert symmetry_defect(problem, A, B, Ap, Bp).max() < 1e-10  # Newton-polished projection
    # the whitened projection is another point of S, where the matrix is not symmetric (kappa = 5)
    Aw, Bw = whitened_projection(problem, A, B)
    assert symmetry_defect(problem, A, B, Aw, Bw).min() > 1e-3
    # on S itself: the whitened projection of theta(J) is theta(J)
    Aw0, Bw0 = whitened_projection(problem, A_s, B_s)
    torch.testing.assert_close(Aw0, A_s, rtol=0, atol=1e-12)
    torch.testing.assert_close(Bw0, B_s, rtol=0, atol=1e-12)


def test_lemma_scan_at_the_one_point_scan_points(problem):
    scan = one_point_scan(problem, (1e-2, 0.1, 0.5), 6, seed=3)
    ls = lemma_scan(problem, scan)
    N = scan["a"].numel()
    assert ls["asym_P"].shape == (N,) and int(ls["random"].sum()) == 3 * 6
    est, rival = lemma1_estimate(ls)
    rand = ls["random"]
    assert est.hi == est.value == float(ls["asym_P"][rand].max()) and est.lo == float(ls["asym_P"][rand].min())
    assert est.hi < 1e-10 and rival > 1e-3
    assert ls["asym_P"].max() < 1e-10  # also along the Hessian's eigen-directions
    # near S, 2 (Q - Q*) / ||Delta||_P^2 is a Rayleigh quotient of the Hessian across S: in [alpha, lambda_max]
    c = 2 * ls["excess"] / ls["dist"].pow(2)
    near = ls["r"] <= 1e-2
    assert (c[near] >= ls["alpha"] * (1 - 0.05)).all() and (c[near] <= ls["lam_max"] * (1 + 0.05)).all()
    l2 = lemma2_fraction(ls, near=0.1)
    assert l2["n"] == int((ls["r"] <= 0.1).sum()) and 0 <= l2["rival"] <= l2["fraction"].value <= 1
    with pytest.raises(ValueError, match="near="):
        lemma2_fraction(ls, near=1e-3)


def test_lemma2_fraction_counts_the_points_under_the_bound():
    ls = {"r": torch.tensor([0.01, 0.05, 0.1, 0.3]), "dist": torch.ones(4),
          "excess": torch.tensor([0.05, 0.1, 0.4, 5.0]) / 2, "lam_max": 0.2, "alpha": 0.01}
    l2 = lemma2_fraction(ls, near=0.1)  # c = 0.05, 0.1, 0.4: two of three below 0.2; below 0.04: none
    assert l2["n"] == 3 and l2["fraction"].value == pytest.approx(2 / 3) and l2["rival"] == 0.0
    assert l2["c_max"] == pytest.approx(2.0)


def test_lemma4_terms_reduce_to_the_population_quantities_without_noise(problem, gen):
    A_s, B_s = manifold_point(problem)
    dA = 0.01 * torch.randn(A_s.shape, generator=gen, dtype=DT)
    dB = 0.01 * torch.randn(B_s.shape, generator=gen, dtype=DT)
    ZA, ZB = population_grad(A_s + dA, B_s + dB, problem.M, problem.Sigma)
    K = 3
    gA, gB = ZA[:, None].expand(-1, K, -1, -1), ZB[:, None].expand(-1, K, -1, -1)
    t = lemma4_terms(problem, dA, dB, gA, gB, ZA, ZB, problem.Sigma, alpha=0.01, beta=0.04)
    Si = torch.linalg.inv(problem.Sigma)
    sq = ZA.pow(2).sum((1, 2)) + ((Si @ ZB) * ZB).sum((1, 2))  # ||P^{-1} Z||_P^2 with P_hat = P
    inner = (ZA * dA).sum((1, 2)) + (ZB * dB).sum((1, 2))  # <P^{-1} Z, Delta>_P
    dist2 = p_norm(problem, dA, dB).pow(2)
    torch.testing.assert_close(t["lhs"], sq)
    torch.testing.assert_close(t["a"], inner / dist2)
    assert t["xi2"].abs().max() < 1e-30 and t["ratio_se"].max() < 1e-12
    assert t["beta_tilde"] == pytest.approx(3 * 0.04 + 0.01**2 / 12) and t["nu"] == pytest.approx(6 + 1e-4 / 0.24)
    torch.testing.assert_close(t["ratio"], sq / (t["beta_tilde"] * dist2))
    # two sequences Z + e and Z - e: the unbiased squares remove ||e||^2 in each metric
    e = 1e-3 * torch.randn(ZA.shape, generator=gen, dtype=DT)
    gA2 = torch.stack([ZA + e, ZA - e], 1)
    gB2 = ZB[:, None].expand(-1, 2, -1, -1)
    t2 = lemma4_terms(problem, dA, dB, gA2, gB2, ZA, ZB, problem.Sigma, alpha=0.01, beta=0.04)
    torch.testing.assert_close(t2["lhs"], sq - e.pow(2).sum((1, 2)))
    torch.testing.assert_close(t2["xi2"], -e.pow(2).sum((1, 2)))


def test_lemma4_instance_measures_the_hypothesis_and_both_sides(problem):
    l4 = lemma4_instance(problem, 0.1, 3, 24, 64, 4096, seed=1)
    assert l4["ratio"].shape == (3,) and (l4["ratio_se"] > 0).all()
    assert 0 < l4["eps_P"] < 0.2 and l4["eps_bound"] == pytest.approx(l4["alpha"] / (6 * l4["beta"]))
    assert l4["ratio_max"].lo <= l4["ratio"].max().item() <= l4["ratio_max"].hi
    torch.testing.assert_close(l4["dist2"].sqrt(), torch.full((3,), 0.1 * float(
        p_norm(problem.member(0), *manifold_point(problem.member(0)))), dtype=DT), rtol=0.5, atol=0)


def test_sequence_gradients_average_to_the_oracle(problem):
    from icl_lib.paper2.algorithms import GradientOracle

    A, B = manifold_point(problem)
    sA, sB = sequence_gradients(problem, A, B, 10, 6, torch.Generator().manual_seed(5))
    gA, gB = GradientOracle(problem, 10, 6, True, torch.Generator().manual_seed(5))(A, B)
    torch.testing.assert_close(sA.mean(1), gA)
    torch.testing.assert_close(sB.mean(1), gB)


def test_the_regulariser_gradient_is_cubic_near_the_stationary_point_zero(problem, gen):
    A = torch.randn(problem.M.shape, generator=gen, dtype=DT)
    B = torch.randn(problem.R, problem.d, problem.d, generator=gen, dtype=DT)
    zeros = population_grad(0 * A, 0 * B, problem.M, problem.Sigma, True)
    assert max(z.abs().max() for z in zeros) == 0  # theta = 0 is stationary for Q as for L
    rel = []
    for t in (1e-3, 1e-2):
        gq = population_grad(t * A, t * B, problem.M, problem.Sigma, True)
        gl = population_grad(t * A, t * B, problem.M, problem.Sigma, False)
        # the difference is grad R = (A Sigma N Sigma / 2, -Sigma B Sigma N Sigma / 2), N = A^T A - B^T Sigma B
        N = t**2 * (A.transpose(-1, -2) @ A - B.transpose(-1, -2) @ problem.Sigma @ B)
        S = problem.Sigma
        torch.testing.assert_close(gq[0] - gl[0], 0.5 * t * A @ S @ N @ S, rtol=1e-9, atol=1e-30)
        torch.testing.assert_close(gq[1] - gl[1], -0.5 * t * S @ B @ S @ N @ S, rtol=1e-9, atol=1e-30)
        rel.append(float((gq[0] - gl[0]).norm() / gl[0].norm()))
    assert math.log(rel[1] / rel[0]) / math.log(10) == pytest.approx(2.0, abs=1e-2)  # cubic over linear


def test_random_start_runs_share_starts_and_step(problem):
    cfg = RunConfig(n=None, n_init=64, steps=300)
    res = random_start_runs(problem, 3, cfg, seed=2)
    q, l = PAIR
    torch.testing.assert_close(res[q]["A0"], res[l]["A0"], rtol=0, atol=0)
    torch.testing.assert_close(res[q]["B0"], res[l]["B0"], rtol=0, atol=0)
    assert res["eta"].shape == (6,)
    assert torch.equal(res["eta"], torch.minimum(res["eta_rule"][q], res["eta_rule"][l]))
    assert (res[l]["excess"][0] == res[q]["excess"][0]).all()
    for m in PAIR:  # escaping theta = 0 comes before reaching the basin
        assert (res[m]["t_escape"] <= res[m]["t_basin"]).all()
    est, info = basin_time_ratio(res)
    assert len(info["ratio"]) == 6 and est.lo <= est.value <= est.hi


def test_basin_time_ratio_counts_censored_runs_against_the_regulariser():
    q, l = PAIR
    res = {"steps": 9, q: {"t_basin": torch.tensor([5, 10, 10, 2]), "t_escape": torch.tensor([1, 1, 1, 1])},
           l: {"t_basin": torch.tensor([10, 5, 10, 4]), "t_escape": torch.tensor([1, 1, 1, 1])}}
    est, info = basin_time_ratio(res)
    assert info["ratio"] == [0.5, None, None, 0.5]  # only L censored: its bound t_Q / (steps + 1)
    assert info["reached"] == {q: 0.5, l: 0.5} and info["escape_ratio"] == 1.0
    assert math.isinf(est.value) or est.value >= 0.5


def test_run_takes_a_given_step(problem):
    cfg = RunConfig(n=None, n_init=64, steps=3)
    eta = torch.full((problem.R,), 0.5, dtype=DT)
    assert torch.equal(run(problem, "gd_reg_random", cfg, eta=eta).eta, eta)
    with pytest.raises(ValueError, match="eta="):
        run(problem, "gd", cfg, eta=-eta)


def test_rate_vs_d_keeps_p_over_d_and_fits_a_geometric_rate():
    assert [p_for(k, 6, 4) for k in (2, 3, 4, 8, 16)] == [3, 4, 6, 12, 24] and p_for(2, 4, 4) == 2
    rd = rate_vs_d(P2Config(d=4, p=6), (2, 3, 4), RunConfig(n=None, n_init=64, steps=150), R=2, n_per_d=256)
    assert rd["p"].tolist() == [3, 4, 6] and rd["mu"].shape == (3, 2)
    assert (rd["mu"] > 0).all() and (rd["mu"] < 1).all() and (rd["r2"] > 0.99).all()
