"""The manifold of global minima of ``Q`` and the geometry around it (paper 2, Section 4, Appendix B.1, Theorem 1).

Goel, Soltanolkotabi, Bartlett (2026):

* :func:`manifold_point`, :func:`manifold_projection`, :func:`manifold_distance` -- the manifold of
  global minima of ``Q``, ``S = {theta(J): J in O(d)}`` with ``A(J) = U G^{1/2} J^T Sigma^{-1/2}``,
  ``B(J) = Sigma^{-1/2} V G^{1/2} J^T Sigma^{-1/2}`` (``U G V^T = svd(M Sigma^{1/2})``, Appendix
  B.1), the projection onto it and the distance to it in the P-geometry
  ``||P^{1/2}(theta - theta(J))||_F`` (Section 4) or in the whitened geometry;
* :func:`tangent_basis`, :func:`normal_part`, :func:`p_norm` -- its tangent space and the
  P-orthogonal part of a displacement;
* :func:`one_point_ratios` -- Theorem 1(iii)'s one-point strong convexity and smoothness at given
  points; :func:`hessian_P` -- the Hessian of ``Q`` (or ``L``) at a point, and
  :func:`rate_prediction`, the asymptotic rate of a method it implies;
* :func:`saddle_curvature`, :func:`saddle_curvatures`, :func:`balance`, :func:`whitened_perturbation`
  -- the curvature at the saddle ``theta = 0`` (its top mode, and every mode), the balance of the
  whitened factors, and a point at a given whitened distance.

Used by chapter 8 and its experiments (:mod:`icl_lib.paper2.experiments`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..seeding import generator
from ..validate import check_choice, check_float, check_int
from .data import Problem
from .loss import population_grad, population_Q, transpose

__all__ = [
    "saddle_curvature",
    "saddle_curvatures",
    "balance",
    "manifold_point",
    "manifold_distance",
    "manifold_projection",
    "p_norm",
    "tangent_basis",
    "normal_part",
    "one_point_ratios",
    "hessian_P",
    "rate_prediction",
    "whitened_perturbation",
]


def saddle_curvature(problem: Problem) -> torch.Tensor:
    """``sigma_1(M Sigma) lambda_1(Sigma)``, minus the smallest eigenvalue of the Hessian of ``L`` at
    ``theta = 0`` (the strict saddle of paper 2's population loss): ``(R,)``.

    Near 0, ``grad_A L = -M Sigma B Sigma`` and ``grad_B L = -Sigma M^T A Sigma``, an operator with
    eigenvalues ``+- sigma_i(M Sigma) lambda_j(Sigma)``; plain GD with step ``eta`` multiplies the
    top component by ``1 + eta sigma_1(M Sigma) lambda_1(Sigma)`` per step (chapter 8, Figure 4).
    """
    s = torch.linalg.matrix_norm(problem.M @ problem.Sigma, 2)
    return s * torch.linalg.eigvalsh(problem.Sigma)[:, -1]


def saddle_curvatures(problem: Problem) -> torch.Tensor:
    """Every product ``sigma_i(M Sigma) lambda_j(Sigma)``, largest first: ``(R, d * d)``, the
    positive eigenvalues of minus the Hessian of ``L`` at ``theta = 0`` (the first is
    :func:`saddle_curvature`).  The second is the next mode's: plain GD from a small start grows
    along it by ``1 + eta`` times it per step, the rival of the top mode's growth (chapter 8)."""
    s = torch.linalg.svdvals(problem.M @ problem.Sigma)  # (R, d)
    lam = torch.linalg.eigvalsh(problem.Sigma)  # (R, d)
    return (s[:, :, None] * lam[:, None, :]).flatten(1).sort(dim=1, descending=True).values


def balance(problem: Problem, A: torch.Tensor, B: torch.Tensor):
    """Balance of the whitened factors ``A~ = A Sigma^{1/2}``, ``B~ = Sigma^{1/2} B Sigma^{1/2}``.

    Returns ``(||A~^T A~ - B~^T B~||_F, ||A~||_F, ||B~||_F)``, each ``(R,)``; the first is
    ``sqrt(8 R(theta))``, zero on the manifold of minima of ``Q`` (paper 2, Section 4; chapter 8).
    """
    Sh = problem.Sigma_half
    At, Bt = A @ Sh, Sh @ B @ Sh
    imb = (transpose(At) @ At - transpose(Bt) @ Bt).pow(2).sum((-1, -2)).sqrt()
    return imb, At.pow(2).sum((-1, -2)).sqrt(), Bt.pow(2).sum((-1, -2)).sqrt()


def _svd_target(problem: Problem):
    U, G, Vh = torch.linalg.svd(problem.M_tilde, full_matrices=False)  # (R,p,d), (R,d), (R,d,d)
    return U, G, transpose(Vh)


def manifold_point(problem: Problem, J: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A global minimiser ``theta(J)`` of ``Q`` (paper 2, Appendix B.1); ``J (R, d, d)`` orthogonal.

    ``A(J) = U G^{1/2} J^T Sigma^{-1/2}``, ``B(J) = Sigma^{-1/2} V G^{1/2} J^T Sigma^{-1/2}`` with
    ``U G V^T = svd(M Sigma^{1/2})``; ``J = I`` when omitted.
    """
    U, G, V = _svd_target(problem)
    S_mhalf = torch.linalg.inv(problem.Sigma_half)
    g = torch.diag_embed(G.sqrt())
    Jt = torch.eye(problem.d, dtype=G.dtype, device=G.device).expand_as(g) if J is None else transpose(J)
    return U @ g @ Jt @ S_mhalf, S_mhalf @ V @ g @ Jt @ S_mhalf


def _procrustes(Z: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``min_Omega ||Z - W Omega||_F`` over orthogonal ``Omega``: (distance, Omega)."""
    U, S, Vh = torch.linalg.svd(transpose(W) @ Z)
    Omega = U @ Vh
    d2 = Z.pow(2).sum((-1, -2)) + W.pow(2).sum((-1, -2)) - 2 * S.sum(-1)
    return d2.clamp_min(0).sqrt(), Omega


def _orthogonal_min(Z: torch.Tensor, W: torch.Tensor, Sm: torch.Tensor, O0: torch.Tensor,
                    maxiter: int = 10_000) -> torch.Tensor:
    """``argmin ||Z - W Omega Sm||_F`` over ``Omega = O0 expm(S)``, ``S`` skew, for every member of
    the batch at once (``Z, W (N, k, d)``, ``Sm, O0 (N, d, d)``): one L-BFGS on the concatenated
    skew coordinates of the separable sum (at most ``maxiter`` iterations).  Returns ``Omega (N, d, d)``."""
    from scipy.optimize import minimize

    N, _, d = Z.shape
    iu = torch.triu_indices(d, d, 1)
    m = len(iu[0])

    def omega(vt):
        S = torch.zeros(N, d, d, dtype=Z.dtype)
        S[:, iu[0], iu[1]] = vt
        return O0 @ torch.linalg.matrix_exp(S - transpose(S))

    def f(v):
        vt = torch.as_tensor(v, dtype=Z.dtype).reshape(N, m).requires_grad_(True)
        val = (Z - W @ omega(vt) @ Sm).pow(2).sum()
        (g,) = torch.autograd.grad(val, vt)
        return val.item(), g.reshape(-1).numpy()

    opts = {"gtol": 1e-14, "ftol": 1e-16, "maxiter": maxiter, "maxcor": 30}
    res = minimize(f, np.zeros(N * m), jac=True, method="L-BFGS-B", options=opts)
    with torch.no_grad():
        return omega(torch.as_tensor(res.x, dtype=Z.dtype).reshape(N, m))


def _newton_polish(Z: torch.Tensor, W: torch.Tensor, Sm: torch.Tensor, Om: torch.Tensor, iters: int = 3) -> torch.Tensor:
    """Newton steps on ``||Z - W Omega Sm||_F^2`` over ``Omega = Om expm(S)``, ``S`` skew, from
    ``Om (N, d, d)``, every member at once (the sum is separable, so the Hessian is block-diagonal);
    a member whose Hessian is not positive definite keeps its ``Omega``.  L-BFGS's line search stops
    where the function's round-off hides its decrease, about ``sqrt(eps)`` of the gradient; Newton
    steps solve the first-order condition (paper 2's Lemma 1) to round-off instead.  Chapter 8."""
    N, _, d = Z.shape
    iu = torch.triu_indices(d, d, 1)
    m = len(iu[0])
    if m == 0:
        return Om
    for _ in range(iters):
        v = torch.zeros(N, m, dtype=Z.dtype, requires_grad=True)
        S = torch.zeros(N, d, d, dtype=Z.dtype)
        S[:, iu[0], iu[1]] = v
        val = (Z - W @ (Om @ torch.linalg.matrix_exp(S - transpose(S))) @ Sm).pow(2).sum()
        (g,) = torch.autograd.grad(val, v, create_graph=True)
        H = torch.stack([torch.autograd.grad(g[:, j].sum(), v, retain_graph=True)[0] for j in range(m)], 1)
        g, H = g.detach(), 0.5 * (H + transpose(H)).detach()  # (N, m), (N, m, m)
        L, info = torch.linalg.cholesky_ex(H)
        ok = info == 0
        step = torch.zeros_like(g)
        if ok.any():
            step[ok] = -torch.cholesky_solve(g[ok][..., None], L[ok])[..., 0]
        S = torch.zeros(N, d, d, dtype=Z.dtype)
        S[:, iu[0], iu[1]] = step
        Om = Om @ torch.linalg.matrix_exp(S - transpose(S))
    return Om


def manifold_projection(problem: Problem, A: torch.Tensor, B: torch.Tensor, restarts: int = 0,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The projection of ``theta = (A, B)`` onto the manifold of minima ``S`` in the P-geometry
    (paper 2, Theorem 1(iii): the reference point ``theta*`` is the projection in the P-norm).

    Minimises ``||P^{1/2}(theta - theta(J))||_F`` over ``J in O(d)``, i.e. ``||Z - W* Omega
    Sigma^{-1/2}||_F`` with ``Z = [A; Sigma^{1/2} B]``, ``W* = [U; V] G^{1/2}``, ``Omega = J^T``,
    numerically, for all repetitions at once: from the whitened Procrustes solution, from it with
    one column flipped (the other component of ``O(d)``) and from ``restarts`` random rotations; the
    first is run to convergence, the others for 50 iterations and then to convergence where they
    are already better; the best is kept and polished by Newton steps (:func:`_newton_polish`).  Returns ``(distance (R,), A(J) (R, p, d), B(J) (R, d, d))``.  Chapter 8.
    """
    check_int("restarts", restarts, 0, 1000)
    U, G, V = _svd_target(problem)
    W_star = torch.cat([U, V], -2) @ torch.diag_embed(G.sqrt())  # (R, p+d, d)
    Sh = problem.Sigma_half
    W = torch.cat([A @ Sh, Sh @ B @ Sh], -2)
    _, Omega_w = _procrustes(W, W_star)
    dev, dt = A.device, A.dtype
    Z, Sm = torch.cat([A, Sh @ B], -2).cpu(), torch.linalg.inv(Sh).cpu()
    Ws, Om = W_star.cpu(), Omega_w.cpu()
    R, d = problem.R, problem.d
    flip = torch.eye(d, dtype=dt)
    flip[0, 0] = -1
    starts = [Om, Om @ flip]
    gen = generator(seed, "manifold-restarts")
    for _ in range(restarts):
        Q, Rr = torch.linalg.qr(torch.randn(R, d, d, generator=gen, dtype=dt))
        starts.append(Q * torch.sign(torch.diagonal(Rr, dim1=-2, dim2=-1))[:, None, :])
    def value(om, i=slice(None)):
        return (Z[i] - Ws[i] @ om @ Sm[i]).pow(2).sum((-1, -2)).clamp_min(0).sqrt()

    best_om = _orthogonal_min(Z, Ws, Sm, Om)  # from the whitened solution, to convergence
    best = value(best_om)
    for O0 in starts[1:]:  # the others with a budget, then to convergence where they win
        om = _orthogonal_min(Z, Ws, Sm, O0, maxiter=50)
        win = value(om) < best
        if win.any():
            idx = win.nonzero().reshape(-1)
            om_w = _orthogonal_min(Z[idx], Ws[idx], Sm[idx], om[idx])
            d_w = value(om_w, idx)
            keep = d_w < best[idx]
            best[idx[keep]], best_om[idx[keep]] = d_w[keep], om_w[keep]
    polished = _newton_polish(Z, Ws, Sm, best_om)
    d_pol = value(polished)
    keep = d_pol <= best * (1 + 1e-12)  # a Newton step that does not lower the distance is not taken
    best[keep], best_om[keep] = d_pol[keep], polished[keep]
    g = torch.diag_embed(G.sqrt()).cpu()
    A_p = U.cpu() @ g @ best_om @ Sm
    B_p = Sm @ V.cpu() @ g @ best_om @ Sm
    return best.to(dev), A_p.to(dev), B_p.to(dev)


def manifold_distance(problem: Problem, A: torch.Tensor, B: torch.Tensor, geometry: str = "P",
                      restarts: int = 4, seed: int = 0) -> torch.Tensor:
    """Distance from ``theta = (A, B)`` to the manifold of minima ``S``, ``(R,)`` (chapter 8).

    ``geometry="P"``: ``min_J ||P^{1/2}(theta - theta(J))||_F`` with ``P = diag(I_p, Sigma)`` (the
    norm of paper 2's Lemma 3 and Theorem 2), minimised numerically over the orthogonal group
    (:func:`manifold_projection`, with ``restarts`` random starts besides the whitened solution).
    ``geometry="whitened"``: ``min_J ||W - W*(J)||_F`` in ``W = [A Sigma^{1/2}; Sigma^{1/2} B Sigma^{1/2}]``,
    an orthogonal Procrustes problem solved in closed form.
    """
    check_choice("geometry", geometry, ("P", "whitened"))
    check_int("restarts", restarts, 0, 1000)
    if geometry == "whitened":
        U, G, V = _svd_target(problem)
        W_star = torch.cat([U, V], -2) @ torch.diag_embed(G.sqrt())
        Sh = problem.Sigma_half
        return _procrustes(torch.cat([A @ Sh, Sh @ B @ Sh], -2), W_star)[0]
    return manifold_projection(problem, A, B, restarts, seed)[0]


def tangent_basis(problem: Problem, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """The tangent space of ``S`` at its point ``theta(J) = (A, B)``: ``d(d-1)/2`` directions
    ``(R, m, p+d, d)``, ``P^{-1/2} W* J^T E_kl Sigma^{-1/2}`` with ``E_kl = e_k e_l^T - e_l e_k^T``
    (the derivative of ``theta(J exp(-t E_kl))``; ``P^{1/2} theta(J) = W* J^T Sigma^{-1/2}``).
    Chapter 8 removes them from a displacement (:func:`normal_part`)."""
    R, p, d = A.shape
    Sh = problem.Sigma_half
    Sm = torch.linalg.inv(Sh)
    Z = torch.cat([A, Sh @ B], -2) @ Sh  # P^{1/2} theta Sigma^{1/2} = W* J^T, (R, p+d, d)
    out = []
    for k in range(d):
        for l in range(k + 1, d):
            E = torch.zeros(d, d, dtype=A.dtype, device=A.device)
            E[k, l], E[l, k] = 1.0, -1.0
            T = Z @ E @ Sm  # in P^{1/2}-coordinates
            out.append(torch.cat([T[:, :p], Sm @ T[:, p:]], -2))
    return torch.stack(out, 1)


def normal_part(problem: Problem, dA: torch.Tensor, dB: torch.Tensor, basis: torch.Tensor):
    """The P-orthogonal projection of the displacement ``(dA, dB)`` onto the complement of the
    tangent ``basis`` (:func:`tangent_basis`): ``(dA_N, dB_N)``.  Chapter 8."""
    p = dA.shape[-2]
    D = torch.cat([dA, dB], -2)  # (R, p+d, d)
    m = basis.shape[1]
    Gm = torch.empty(basis.shape[0], m, m, dtype=D.dtype, device=D.device)
    rhs = torch.empty(basis.shape[0], m, dtype=D.dtype, device=D.device)
    for i in range(m):
        rhs[:, i] = _p_inner(problem, basis[:, i], D)
        for j in range(m):
            Gm[:, i, j] = _p_inner(problem, basis[:, i], basis[:, j])
    c = torch.linalg.solve(Gm, rhs)  # (R, m)
    N = D - (c[:, :, None, None] * basis).sum(1)
    return N[:, :p], N[:, p:]


def _p_inner(problem: Problem, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``<X, Y>_P = tr(X^T P Y)`` for stacked ``(R, p+d, d)`` matrices: ``(R,)``."""
    p = problem.p
    return (X[:, :p] * Y[:, :p]).sum((-1, -2)) + ((problem.Sigma @ X[:, p:]) * Y[:, p:]).sum((-1, -2))


def p_norm(problem: Problem, dA: torch.Tensor, dB: torch.Tensor) -> torch.Tensor:
    """``||Delta||_P = ||P^{1/2} [dA; dB]||_F = sqrt(||dA||_F^2 + tr(dB^T Sigma dB))``, ``(R,)``
    (paper 2, Section 4's geometry)."""
    return (dA.pow(2).sum((-1, -2)) + ((problem.Sigma @ dB) * dB).sum((-1, -2))).sqrt()


def one_point_ratios(problem: Problem, A: torch.Tensor, B: torch.Tensor, regularised: bool = True) -> dict:
    """Theorem 1(iii) of paper 2 at the points ``theta = (A, B)`` (one per repetition).

    With ``theta*`` the P-projection of ``theta`` onto ``S`` (:func:`manifold_projection`),
    ``Delta = theta - theta*`` and ``Z = grad Q(theta)`` (population, closed form), returns
    ``{"dist": ||Delta||_P, "a": <P^{-1} Z, Delta>_P / ||Delta||_P^2, "b": ||P^{-1} Z||_P^2 /
    ||Delta||_P^2}``, each ``(R,)``, and the projection ``"A_p", "B_p"`` (paper 2's Lemma 1 is
    about it, :mod:`icl_lib.paper2.lemmas`): one-point strong convexity is ``a >= alpha``, one-point
    smoothness ``b <= beta`` (``<X, Y>_P = tr(X^T P Y)``, so ``<P^{-1} Z, Delta>_P = tr(Z^T Delta)``
    and ``||P^{-1} Z||_P^2 = tr(Z^T P^{-1} Z)``).  Chapter 8.
    """
    dist, Ap, Bp = manifold_projection(problem, A, B)
    dA, dB = A - Ap, B - Bp
    gA, gB = population_grad(A, B, problem.M, problem.Sigma, regularised)
    inner = (gA * dA).sum((-1, -2)) + (gB * dB).sum((-1, -2))
    Si = torch.linalg.inv(problem.Sigma)
    sq = gA.pow(2).sum((-1, -2)) + ((Si @ gB) * gB).sum((-1, -2))
    d2 = dist.pow(2)
    return {"dist": dist, "a": inner / d2, "b": sq / d2, "A_p": Ap, "B_p": Bp}


def hessian_P(problem: Problem, A: torch.Tensor, B: torch.Tensor, regularised: bool = True):
    """Eigen-decomposition of the Hessian of ``Q`` (or of ``L``) at ``theta = (A, B)`` of the first
    problem in the P-geometry: ``H_P = G^{-1/2} H G^{-1/2}``, ``G = P (x) I_d`` the metric of
    ``||.||_P`` on ``vec_row(theta)``.

    Returns ``(eigenvalues (D,) ascending, directions (D, p+d, d))``, ``D = (p + d) d``; the
    directions are the eigenvectors mapped back to ``theta``-space, of unit P-norm.  Near ``S`` the
    one-point constants of Theorem 1(iii) are ``alpha = `` the smallest eigenvalue across ``S`` and
    ``beta = `` the largest squared (chapter 8).
    """
    pr = problem.member(0)
    p, d = pr.p, pr.d

    def f(v):
        return population_Q(v[: p * d].reshape(1, p, d), v[p * d :].reshape(1, d, d), pr.M, pr.Sigma, 0.0,
                            regularised).sum()

    v0 = torch.cat([A[0].reshape(-1), B[0].reshape(-1)])
    H = torch.autograd.functional.hessian(f, v0)
    w, V = torch.linalg.eigh(pr.Sigma[0])
    S_mhalf = V @ torch.diag(w.rsqrt()) @ V.T
    g_mhalf = torch.block_diag(torch.eye(p, dtype=H.dtype),
                               S_mhalf)  # P^{-1/2}, (p+d, p+d)
    Gm = torch.kron(g_mhalf, torch.eye(d, dtype=H.dtype))  # G^{-1/2}
    lam, E = torch.linalg.eigh(Gm @ H @ Gm)
    dirs = (Gm @ E).T.reshape(-1, p + d, d)  # theta-space directions of unit P-norm
    return lam, dirs


def rate_prediction(problem: Problem, A: torch.Tensor, B: torch.Tensor, method, eta: float,
                    Sigma_hat_inv: torch.Tensor) -> float:
    """The asymptotic rate of the excess loss of ``method`` (a :class:`~icl_lib.paper2.algorithms.Method`)
    with step ``eta`` near the point ``theta = (A, B)`` of ``S`` (first problem), from the curvature of
    ``Q`` (or ``L``) across ``S``: ``max (1 - eta lambda)^2`` over the eigenvalues ``lambda`` of
    ``C H`` except the ``dim S`` smallest (``H`` the population Hessian, ``C`` the method's
    preconditioner with ``Sigma_hat``; ``dim S = d(d-1)/2`` with the regulariser, ``d^2`` without).
    Paper 2, Theorem 2's ``mu`` as Theorem 1(iii)'s constants set it; chapter 8."""
    from .algorithms import _precond_matrix

    pr = problem.member(0)
    p, d = pr.p, pr.d

    def f(v):
        return population_Q(v[: p * d].reshape(1, p, d), v[p * d :].reshape(1, d, d), pr.M, pr.Sigma, 0.0,
                            method.regularised).sum()

    v0 = torch.cat([A[0].reshape(-1), B[0].reshape(-1)])
    H = torch.autograd.functional.hessian(f, v0)
    C = _precond_matrix(method.precond, Sigma_hat_inv[0], p)
    lam = torch.linalg.eigvals(C @ H).real
    lam = lam[lam.abs().argsort()]
    null = d * (d - 1) // 2 if method.regularised else d * d
    return float(((1 - eta * lam[null:]) ** 2).max())


def whitened_perturbation(problem: Problem, A, B, rel: float, gen: torch.Generator):
    """A point whose whitened factors ``A~ = A Sigma^{1/2}``, ``B~ = Sigma^{1/2} B Sigma^{1/2}`` are
    those of ``(A, B)`` with every entry multiplied by ``1 + rel z``, ``z ~ N(0, 1)`` (first all of
    ``A~``'s, then ``B~``'s, from ``gen``); returns ``(A' (R, p, d), B' (R, d, d))``.

    Perturbing in whitened coordinates keeps the test point of chapter 8's population-loss check
    (paper 2, Section 4) independent of the condition number of ``Sigma``.
    """
    check_float("rel", rel, 0.0)
    Sh, Smh = problem.Sigma_half, torch.linalg.inv(problem.Sigma_half)
    At, Bt = A @ Sh, Sh @ B @ Sh  # whitened factors
    At = At * (1 + rel * torch.randn(At.shape, generator=gen, dtype=At.dtype))
    Bt = Bt * (1 + rel * torch.randn(Bt.shape, generator=gen, dtype=Bt.dtype))
    return At @ Smh, Smh @ Bt @ Smh
