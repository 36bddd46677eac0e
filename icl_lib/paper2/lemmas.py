"""Paper 2's Lemmas 1, 2 and 4 measured near the manifold of minima ``S`` (chapter 8).

Goel, Soltanolkotabi, Bartlett (2026), Section 4 and Appendix B.  With ``theta = [A; B]``,
``P = diag(I_p, Sigma)``, ``theta*`` the projection of ``theta`` onto ``S`` in the P-norm and
``Delta = theta - theta*``:

* **Lemma 1** (Appendix B.1): ``Delta^T P theta* Sigma`` is symmetric.  It is the first-order
  condition of the P-projection over ``O(d)``; :func:`symmetry_defect` measures the asymmetry of
  that matrix relative to the largest it can be, at the P-projection and, as the rival, at the
  projection in the whitened geometry (:func:`whitened_projection`), which minimises another norm.
* **Lemma 2** (Appendix B.2): ``Q(theta) - Q* <= beta/2 ||Delta||_P^2``.  Its proof uses the
  smoothness in the form ``||P^{-1} grad Q||_P <= beta ||Delta||_P``; chapter 8's local constant of
  that form is the largest P-Hessian eigenvalue across ``S``, ``lambda_max`` (Theorem 1(iii)'s
  squared form has ``lambda_max^2``).  :func:`lemma2_fraction` counts the points that satisfy it.
* **Lemma 4** (Section 5, Appendix B.4): with the empirical ``P_hat``, ``Z_hat = E[grad Q_hat]``
  and ``xi = Z_hat - grad Q``, ``||P_hat^{-1} Z_hat||_P^2 <= beta~ ||Delta||_P^2 + nu
  ||P^{-1/2} xi||_F^2`` with ``beta~ = 3 beta + alpha^2/12`` and ``nu = 6 + alpha^2/(6 beta)``, when
  ``||P^{1/2} P_hat^{-1} P^{1/2} - I||_op <= alpha/(6 beta)``.  :func:`lemma4_instance` measures
  both sides by Monte Carlo of the oracle at points near ``S`` (:func:`lemma4_terms`).

Used by chapter 8 with the points of :func:`icl_lib.paper2.experiments.one_point_scan`.
"""

from __future__ import annotations

import math

import torch

from ..seeding import generator
from ..stats import Estimate, extreme, proportion_ci
from ..validate import check_float, check_int
from .data import Problem, sample
from .experiments import _repeat, single_thread
from .loss import population_grad, population_Q, transpose
from .manifold import _procrustes, _svd_target, hessian_P, manifold_point, manifold_projection, p_norm
from .monte_carlo import sequence_gradients

__all__ = [
    "symmetry_defect",
    "whitened_projection",
    "lemma_scan",
    "lemma1_estimate",
    "lemma2_fraction",
    "lemma4_terms",
    "lemma4_instance",
]


def symmetry_defect(problem: Problem, A, B, A_s, B_s) -> torch.Tensor:
    """``||X - X^T||_F / (||Delta||_P ||P^{1/2} theta* Sigma||_F)`` with ``X = Delta^T P theta* Sigma``,
    ``Delta = theta - theta*`` (paper 2, Lemma 1: 0 when ``theta* = (A_s, B_s)`` is the P-projection
    of ``theta = (A, B)``), ``(R,)``.  The denominator bounds ``||X||_F`` (Cauchy-Schwarz), so the
    defect is relative also where ``X`` itself vanishes (along some Hessian eigen-directions).
    ``Delta^T P theta* = dA^T A_s + dB^T Sigma B_s``.  Chapter 8."""
    dA, dB = A - A_s, B - B_s
    S = problem.Sigma
    X = (transpose(dA) @ A_s + transpose(dB) @ S @ B_s) @ S  # (R, d, d)
    scale = p_norm(problem, dA, dB) * (A_s @ S).pow(2).sum((-1, -2)).add(
        (problem.Sigma_half @ B_s @ S).pow(2).sum((-1, -2))).sqrt()
    return (X - transpose(X)).pow(2).sum((-1, -2)).sqrt() / scale


def whitened_projection(problem: Problem, A, B) -> tuple[torch.Tensor, torch.Tensor]:
    """The point ``theta(J)`` of ``S`` nearest to ``theta = (A, B)`` in the whitened geometry
    ``||W - W*(J)||_F``, ``W = [A Sigma^{1/2}; Sigma^{1/2} B Sigma^{1/2}]`` (orthogonal Procrustes,
    closed form): Lemma 1's rival projection (chapter 8).  Returns ``(A(J), B(J))``."""
    U, G, V = _svd_target(problem)
    W_star = torch.cat([U, V], -2) @ torch.diag_embed(G.sqrt())
    Sh = problem.Sigma_half
    _, Omega = _procrustes(torch.cat([A @ Sh, Sh @ B @ Sh], -2), W_star)  # W ~ W* Omega, Omega = J^T
    return manifold_point(problem, transpose(Omega))


def lemma_scan(problem: Problem, scan: dict) -> dict:
    """Lemmas 1 and 2 at the points of :func:`~icl_lib.paper2.experiments.one_point_scan` (its
    ``"points"`` and their P-projections ``"projections"``, first problem), chapter 8.

    Returns ``{"r": (N,) relative distance of the scan, "random": (N,) bool (a Gaussian direction,
    not a Hessian eigen-direction), "asym_P": Lemma 1's defect at the P-projection, "asym_W": at the
    whitened projection, "dist": ||Delta||_P, "excess": Q(theta) - Q*, "lam_max": the largest
    P-Hessian eigenvalue across S (sqrt of the scan's beta), "alpha"}``.
    """
    pr = problem.member(0)
    (A, B), (Ap, Bp) = scan["points"], scan["projections"]
    N = A.shape[0]
    big = _repeat(pr, N)
    S, U = scan["a"].shape
    Aw, Bw = whitened_projection(big, A, B)
    random = torch.zeros(S, U, dtype=torch.bool)
    random[:, : scan["n_random"]] = True
    return {"r": scan["r"][:, None].expand(S, U).reshape(-1), "random": random.reshape(-1),
            "asym_P": symmetry_defect(big, A, B, Ap, Bp), "asym_W": symmetry_defect(big, A, B, Aw, Bw),
            "dist": p_norm(big, A - Ap, B - Bp), "excess": population_Q(A, B, big.M, big.Sigma, 0.0, True),
            "lam_max": math.sqrt(scan["beta"]), "alpha": scan["alpha"]}


def lemma1_estimate(ls: dict) -> tuple[Estimate, float]:
    """Lemma 1 at the points of :func:`lemma_scan` along random directions (every distance): the
    P-projection's defect as an :class:`~icl_lib.stats.Estimate` valued at its largest, with the
    range over the points as its interval (``Below(t)`` then passes when every point is below
    ``t``), and the rival's smallest defect at the same points (whitened projection), which an
    ``Excludes`` rule keeps out of that range.  The Hessian eigen-directions are left out: along
    some of them ``X = 0`` and both projections are ``theta(I)``.  Chapter 8."""
    sel = ls["random"]
    a = ls["asym_P"][sel].numpy()
    e = Estimate(float(a.max()), float(a.min()), float(a.max()), what=f"range over {a.size} points near S "
                 "(the value is the largest)")
    return e, float(ls["asym_W"][sel].min())


def lemma2_fraction(ls: dict, near: float = 0.1) -> dict:
    """Lemma 2 at the points of :func:`lemma_scan` with ``r <= near``: ``c = 2 (Q - Q*) /
    ||Delta||_P^2`` against ``lambda_max`` (the smoothness constant in the form Lemma 2's proof
    uses).  Returns ``{"fraction": Clopper-Pearson estimate of the fraction with c <= lambda_max,
    "rival": the fraction with c <= lambda_max^2 (Theorem 1(iii)'s squared constant), "c_max":
    max c / lambda_max, "n": points}``.  Chapter 8."""
    check_float("near", near, 0.0, lo_open=True)
    sel = ls["r"] <= near
    if not bool(sel.any()):
        raise ValueError(f"near={near} is invalid: accepted a distance that covers at least one scanned point")
    c = (2 * ls["excess"][sel] / ls["dist"][sel].pow(2)).numpy()
    lam = ls["lam_max"]
    k, n = int((c <= lam).sum()), int(c.size)
    return {"fraction": proportion_ci(k, n), "rival": float((c <= lam**2).mean()), "c_max": float(c.max() / lam),
            "n": n}


def _stack(gA, gB):
    return torch.cat([gA, gB], -2)


def _mean_sq(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``||mean_k x_k||^2 - tr Cov(x) / K`` (unbiased for ``||E x||^2``) and the mean, ``x (R, K, D)``."""
    K = x.shape[1]
    m = x.mean(1)
    tr = (x - m[:, None]).pow(2).sum((1, 2)) / (K - 1)
    return m.pow(2).sum(-1) - tr / K, m


def lemma4_terms(problem: Problem, dA, dB, gA, gB, ZA, ZB, Sigma_hat, alpha: float, beta: float) -> dict:
    """Both sides of Lemma 4's smoothness inequality at ``R`` points, from ``K`` per-sequence
    oracle gradients ``gA (R, K, p, d)``, ``gB (R, K, d, d)`` (paper 2, Lemma 4; chapter 8).

    ``Delta = (dA, dB)`` is each point minus its P-projection, ``(ZA, ZB) = grad Q`` there and
    ``P_hat = diag(I_p, Sigma_hat)``.  With the mean gradient ``Z_hat`` and ``xi = Z_hat - grad Q``:
    ``lhs = ||P_hat^{-1} Z_hat||_P^2`` and ``xi2 = ||P^{-1/2} xi||_F^2``, each unbiased
    (``||mean||^2 - tr Cov / K``); ``rhs = beta~ ||Delta||_P^2 + nu xi2`` with ``beta~ = 3 beta +
    alpha^2/12``, ``nu = 6 + alpha^2/(6 beta)``; ``ratio = lhs / rhs`` and its delta-method standard
    error over the sequences ``ratio_se``.  Also ``a = <P_hat^{-1} Z_hat, Delta>_P / ||Delta||_P^2``
    (the strong-convexity side) with ``a_se``, and ``dist2 = ||Delta||_P^2``.  ``(R,)`` tensors."""
    K = gA.shape[1]
    if K < 2:
        raise ValueError(f"K={K} is invalid: accepted at least 2 sequences per point")
    Sigma, Sh = problem.Sigma, problem.Sigma_half
    Si = torch.linalg.inv(Sigma_hat)
    w = _stack(gA, (Sh @ Si)[:, None] @ gB).flatten(2)  # P^{1/2} P_hat^{-1} g_k, (R, K, D)
    v = _stack(gA - ZA[:, None], torch.linalg.inv(Sh)[:, None] @ (gB - ZB[:, None])).flatten(2)  # P^{-1/2} xi_k
    a_k = (gA * dA[:, None]).sum((-1, -2)) + ((Si[:, None] @ gB) * (Sigma @ dB)[:, None]).sum((-1, -2))  # (R, K)
    dist2 = p_norm(problem, dA, dB).pow(2)
    lhs, w_bar = _mean_sq(w)
    xi2, v_bar = _mean_sq(v)
    b_t, nu = 3 * beta + alpha**2 / 12, 6 + alpha**2 / (6 * beta)
    rhs = b_t * dist2 + nu * xi2
    ell = (2 * rhs[:, None] * (w @ w_bar[..., None])[..., 0]
           - 2 * nu * lhs[:, None] * (v @ v_bar[..., None])[..., 0]) / rhs[:, None].pow(2)  # linearised ratio
    sq = math.sqrt(K)
    return {"lhs": lhs, "rhs": rhs, "xi2": xi2, "dist2": dist2, "ratio": lhs / rhs, "ratio_se": ell.std(1) / sq,
            "a": a_k.mean(1) / dist2, "a_se": a_k.std(1) / sq / dist2, "beta_tilde": b_t, "nu": nu}


def lemma4_instance(problem: Problem, r: float, n_dirs: int, n: int, K: int, n_init: int, seed: int = 0) -> dict:
    """One instance of Lemma 4 on the first problem, measured by Monte Carlo (paper 2, Lemma 4;
    chapter 8).  Points ``theta(I) + r ||theta(I)||_P u`` along ``n_dirs`` Gaussian directions of
    unit P-norm; ``P_hat`` from one sample of ``n_init`` pairs (as Algorithm 1's initialisation);
    at each point ``K`` fresh sequences of length ``n`` estimate ``Z_hat = E[grad Q_hat]``.  The
    constants are the local ones of the one-point checks: ``alpha`` the smallest P-Hessian eigenvalue
    across ``S``, ``beta`` the largest squared.  Returns :func:`lemma4_terms`' dict plus ``"alpha"``,
    ``"beta"``, ``"eps_P" = ||P^{1/2} P_hat^{-1} P^{1/2} - I||_op`` and ``"eps_bound" = alpha / (6
    beta)`` (the lemma's hypothesis), ``"ratio_max"``: the largest ratio with its
    Bonferroni-simultaneous interval over the points (an :class:`~icl_lib.stats.Estimate`)."""
    check_float("r", r, 0.0, 1.0, True)
    n_dirs, n, K, n_init = check_int("n_dirs", n_dirs, 1), check_int("n", n, 2), check_int("K", K, 2), \
        check_int("n_init", n_init, 2)
    pr = problem.member(0)
    p, d = pr.p, pr.d
    if n_init < d:
        raise ValueError(f"n_init={n_init} is invalid: accepted at least d={d} samples for Sigma_hat")
    A_s, B_s = manifold_point(pr)
    lam, _ = hessian_P(pr, A_s, B_s, True)
    alpha, beta = lam[d * (d - 1) // 2].item(), lam[-1].item() ** 2
    big = _repeat(pr, n_dirs)
    U = torch.randn(n_dirs, p + d, d, generator=generator(seed, "lemma4-directions"), dtype=pr.M.dtype)
    U = U * (r * p_norm(pr, A_s, B_s) / p_norm(big, U[:, :p], U[:, p:]))[:, None, None]
    A, B = A_s + U[:, :p], B_s + U[:, p:]
    X0, _ = sample(pr, 1, n_init, generator(seed, "lemma4-init-sample"))
    Sigma_hat = (transpose(X0[:, 0]) @ X0[:, 0] / n_init).expand(n_dirs, d, d)
    C = pr.Sigma_half[0] @ torch.linalg.inv(Sigma_hat[0]) @ pr.Sigma_half[0]
    with single_thread(pr.M.device):
        _, Ap, Bp = manifold_projection(big, A, B)
        gA, gB = sequence_gradients(big, A, B, n, K, generator(seed, "lemma4-oracle"))
    ZA, ZB = population_grad(A, B, big.M, big.Sigma, True)
    out = lemma4_terms(big, A - Ap, B - Bp, gA, gB, ZA, ZB, Sigma_hat, alpha, beta)
    out.update(alpha=alpha, beta=beta, eps_P=float(torch.linalg.eigvalsh(C - torch.eye(d, dtype=C.dtype)).abs().max()),
               eps_bound=alpha / (6 * beta), n_points=n_dirs,
               ratio_max=extreme(out["ratio"].numpy(), out["ratio_se"].numpy(), "max",
                                 what=f"largest lhs / rhs of {n_dirs} points"))
    return out
