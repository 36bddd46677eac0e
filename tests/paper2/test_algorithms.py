"""Algorithm 1 and its baselines (icl_lib.paper2.algorithms): the spectral start, the preconditioners,
the gradient oracle and the loop."""

import pytest
import torch

from icl_lib.paper2.algorithms import (
    METHODS,
    GradientOracle,
    Method,
    RunConfig,
    precondition,
    run,
    spectral_init,
    step_size,
)
from icl_lib.paper2.data import P2Config, make_problem, sample
from icl_lib.paper2.loss import P_matrix, empirical_Q, population_grad, population_Q, regulariser, stack_theta

DT = torch.float64


@pytest.fixture
def problem():
    return make_problem(P2Config(d=3, p=5, kappa=8.0, noise_std=0.05), R=2, seed=11)


def _sym_pow(S, a):
    w, V = torch.linalg.eigh(S)
    return V @ torch.diag_embed(w**a) @ V.transpose(-1, -2)


def test_spectral_start_reproduces_the_least_squares_estimate(problem, gen):
    X, Y = sample(problem, 1, 50, gen)
    X, Y = X[:, 0], Y[:, 0]
    st = spectral_init(X, Y)
    M_ls = torch.linalg.lstsq(X, Y).solution.transpose(-1, -2)  # independent least squares
    torch.testing.assert_close(st.M_hat, M_ls, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(st.A0 @ st.Sigma_hat @ st.B0.transpose(-1, -2), st.M_hat, rtol=1e-9, atol=1e-12)
    # balanced in the empirical geometry: the regulariser with Sigma_hat vanishes
    assert regulariser(st.A0, st.B0, st.Sigma_hat).abs().max() < 1e-20


def test_spectral_start_rejects_too_few_samples(problem, gen):
    X, Y = sample(problem, 1, 2, gen)
    with pytest.raises(ValueError, match=r"^n=2 is invalid"):
        spectral_init(X[:, 0], Y[:, 0])


def test_whitened_step_is_gradient_descent_in_whitened_coordinates(problem, gen):
    """theta - eta P^-1 grad Q(theta) S^-1  ==  W - eta grad_W Q~(W) mapped back, W = P^{1/2} theta S^{1/2}."""
    X, _ = sample(problem, 1, 40, gen)
    S = X[:, 0].transpose(-1, -2) @ X[:, 0] / 40  # the preconditioner's Sigma_hat
    Sh, Smh = _sym_pow(S, 0.5), _sym_pow(S, -0.5)
    A = 0.3 * torch.randn(problem.R, problem.p, problem.d, generator=gen, dtype=DT)
    B = 0.3 * torch.randn(problem.R, problem.d, problem.d, generator=gen, dtype=DT)
    eta = 0.7
    gA, gB = population_grad(A, B, problem.M, problem.Sigma)
    pA, pB = precondition(gA, gB, "whitened", torch.linalg.inv(S))
    A1, B1 = A - eta * pA, B - eta * pB
    # whitened coordinates (with S): A~ = A S^{1/2}, B~ = S^{1/2} B S^{1/2}
    At = (A @ Sh).requires_grad_(True)
    Bt = (Sh @ B @ Sh).requires_grad_(True)
    q = population_Q(At @ Smh, Smh @ Bt @ Smh, problem.M, problem.Sigma).sum()
    gAt, gBt = torch.autograd.grad(q, (At, Bt))
    At1, Bt1 = At.detach() - eta * gAt, Bt.detach() - eta * gBt
    torch.testing.assert_close(A1, At1 @ Smh, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(B1, Smh @ Bt1 @ Smh, rtol=1e-10, atol=1e-13)


def test_left_preconditioner_is_P_hat_inverse_on_stacked_theta(problem, gen):
    S = problem.Sigma + 0.1 * torch.eye(problem.d, dtype=DT)
    gA = torch.randn(problem.R, problem.p, problem.d, generator=gen, dtype=DT)
    gB = torch.randn(problem.R, problem.d, problem.d, generator=gen, dtype=DT)
    pA, pB = precondition(gA, gB, "left", torch.linalg.inv(S))
    ref = torch.linalg.solve(P_matrix(S, problem.p), stack_theta(gA, gB))
    torch.testing.assert_close(stack_theta(pA, pB), ref)
    qA, qB = precondition(gA, gB, "none", torch.linalg.inv(S))
    assert qA is gA and qB is gB


def test_oracle_is_the_mean_gradient_of_Q_hat_over_fresh_sequences(problem):
    A = 0.2 * torch.ones(problem.R, problem.p, problem.d, dtype=DT)
    B = 0.1 * torch.eye(problem.d, dtype=DT).expand(problem.R, -1, -1).clone()
    oracle = GradientOracle(problem, 20, 5, True, torch.Generator().manual_seed(3))
    gA, gB = oracle(A, B)
    X, Y = sample(problem, 5, 20, torch.Generator().manual_seed(3))  # the same draws
    A_, B_ = A.clone().requires_grad_(True), B.clone().requires_grad_(True)
    rA, rB = torch.autograd.grad(empirical_Q(A_, B_, X, Y, True).sum(), (A_, B_))
    torch.testing.assert_close(gA, rA, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(gB, rB, rtol=1e-10, atol=1e-13)
    pop = GradientOracle(problem, None, 5, True, torch.Generator())(A, B)
    torch.testing.assert_close(pop[0], population_grad(A, B, problem.M, problem.Sigma)[0])


def test_algorithm_1_converges_with_the_population_oracle(problem):
    """From the spectral start, with the exact gradient, the excess loss reaches round-off."""
    h = run(problem, "alg1", RunConfig(n=None, n_init=200, steps=250), seed=1)
    assert (h.excess[-1] < 1e-25).all(), h.excess[-1]
    assert (h.excess[0] > 1e-7).all()
    # and the paper's left preconditioner converges too, more slowly at this condition number
    left = run(problem, "alg1_left", RunConfig(n=None, n_init=200, steps=250), seed=1)
    assert (left.excess[-1] < 1e-8).all() and (left.excess[60] > h.excess[60]).all()


def test_methods_share_the_spectral_start_and_runs_are_reproducible(problem):
    cfg = RunConfig(n=12, K=3, steps=4)
    a = run(problem, "alg1", cfg, seed=5)
    b = run(problem, "no_precond", cfg, seed=5)
    c = run(problem, "alg1", cfg, seed=5)
    torch.testing.assert_close(a.A0, b.A0)
    torch.testing.assert_close(a.excess, c.excess, rtol=0, atol=0)
    g = run(problem, "gd", RunConfig(n=12, K=3, steps=2, init_scale=1e-3), seed=5)
    ratio = g.theta_norm[0] / (a.A0.pow(2).sum((1, 2)) + a.B0.pow(2).sum((1, 2))).sqrt()
    torch.testing.assert_close(ratio, torch.full_like(ratio, 1e-3))


def test_step_size_whitened_is_invariant_to_the_condition_number():
    """Whitened preconditioning makes the problem affine invariant: eta does not depend on kappa
    (the same seed gives the same whitened data, see make_problem)."""
    etas = []
    for kappa in (1.0, 30.0):
        pr = make_problem(P2Config(d=3, p=4, kappa=kappa), R=1, seed=2)
        X, Y = sample(pr, 1, 400, torch.Generator().manual_seed(0))
        etas.append(step_size(spectral_init(X[:, 0], Y[:, 0]), METHODS["alg1"], 0.5))
    torch.testing.assert_close(etas[0], etas[1], rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: P2Config(d=4, p=3), "p"),
        (lambda: P2Config(m_op=0.0625), "m_op"),
        (lambda: P2Config(m_op=0.0), "m_op"),
        (lambda: P2Config(kappa=0.5), "kappa"),
        (lambda: P2Config(noise_std=-1), "noise_std"),
        (lambda: P2Config(d=0), "d"),
        (lambda: RunConfig(n=1), "n"),
        (lambda: RunConfig(n=None), "n_init"),
        (lambda: RunConfig(eta_scale=2.0), "eta_scale"),
        (lambda: RunConfig(K=0), "K"),
        (lambda: RunConfig(tail=0.0), "tail"),
        (lambda: Method("x", precond="right"), "precond"),
        (lambda: Method("x", init="zero"), "init"),
        (lambda: run(make_problem(P2Config()), "sgd", RunConfig()), "method"),
    ],
)
def test_invalid_parameter(make, name):
    with pytest.raises(ValueError) as err:
        make()
    msg = str(err.value)
    assert msg.startswith(f"{name}=") and "accepted" in msg


def test_run_keeps_the_iterates_and_starts_where_asked(problem):
    cfg = RunConfig(n=None, n_init=64, steps=5)
    h = run(problem, "alg1", cfg, seed=2, keep=True)
    assert h.A_hist.shape == (6,) + h.A.shape and h.B_hist.shape == (6,) + h.B.shape
    torch.testing.assert_close(h.A_hist[0], h.A0)
    torch.testing.assert_close(h.A_hist[-1], h.A)
    A0, B0 = 1.1 * h.A0, 0.9 * h.B0
    g = run(problem, "alg1", cfg, seed=2, keep=True, theta0=(A0, B0))
    torch.testing.assert_close(g.A_hist[0], A0)
    torch.testing.assert_close(g.B_hist[0], B0)
    torch.testing.assert_close(g.eta, h.eta)  # the step still comes from the spectral start


@pytest.mark.parametrize("method", ["alg1", "alg1_left", "no_precond", "no_reg"])
def test_population_rate_matches_the_hessian_prediction(problem, method):
    """With the population oracle the excess falls at the rate of the linearised iteration near S,
    max (1 - eta lambda)^2 over the Hessian's eigenvalues across S (a property of the code that
    chapter 8 no longer counts as a claim of the paper)."""
    from icl_lib.paper2.fits import geometric_rate
    from icl_lib.paper2.manifold import rate_prediction

    h = run(problem, method, RunConfig(n=None, n_init=128, steps=600), seed=0)
    for r in range(problem.R):
        fit = geometric_rate(h.excess[:, r])
        pred = rate_prediction(problem.member(r), h.A[r:r + 1], h.B[r:r + 1], METHODS[method], h.eta[r].item(),
                               h.start.Sigma_hat_inv[r:r + 1])
        assert fit.r2 > 0.99
        assert 1 - fit.mu == pytest.approx(1 - pred, rel=0.1), (fit.mu, pred)
