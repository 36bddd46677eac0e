"""Measurements for paper 2: rate and slope fits, distance to the manifold of minima, Monte Carlo.

Goel, Soltanolkotabi, Bartlett (2026):

* :func:`wls` / :func:`loglog_fit` -- (weighted) least squares with standard errors, for the
  slopes of chapter 8 (error floor against ``n``, Theorem 2; distance of the spectral start against
  ``n``, Lemma 3; rate against the condition number);
* :func:`geometric_rate` -- the rate ``mu`` of ``L(theta_t) - L* ~ mu^t`` (Theorem 2) fitted as a
  straight line on a log scale, with its R^2;
* :func:`manifold_point` / :func:`manifold_distance` -- the manifold of global minima of ``Q``,
  ``S = {theta(J): J in O(d)}`` with ``A(J) = U G^{1/2} J^T Sigma^{-1/2}``,
  ``B(J) = Sigma^{-1/2} V G^{1/2} J^T Sigma^{-1/2}`` (``U G V^T = svd(M Sigma^{1/2})``, Appendix B.1),
  and the distance to it in the P-geometry ``||P^{1/2}(theta - theta(J))||_F`` (Section 4) or in
  the whitened geometry;
* :func:`mc_loss` -- Monte Carlo of ``E[L_hat(theta)]`` for sequences of length ``n``, and of its
  gap to the population loss ``L(theta)`` (Section 4).

Used by chapter 8.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats as sps

from ..seeding import generator
from ..stats import LEVEL, Estimate, mean_ci
from ..validate import check_choice, check_float, check_int
from .data import Problem, sample
from .loss import (
    empirical_loss_grad,
    population_grad,
    population_loss,
    population_Q,
    predict,
    regulariser_grad,
    transpose,
)

__all__ = [
    "Fit",
    "RateFit",
    "wls",
    "loglog_fit",
    "geometric_rate",
    "growth_rate",
    "slope_over_repetitions",
    "drift_z",
    "saddle_curvature",
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
    "LossMC",
    "BiasMC",
    "gradient_bias",
    "mc_loss",
    "whitened_perturbation",
    "gap_fits",
    "gap_extrapolation",
    "SaddleFit",
    "saddle_fit",
    "FloorFit",
    "limit_estimate",
    "transient_rate_ratio",
    "one_point_summary",
    "floor_fit",
    "floor_drift",
    "one_point_fractions",
    "finite_rate_ratio",
]


class Fit(NamedTuple):
    """A straight-line fit ``y = intercept + slope x`` with standard errors.

    ``dof``: the degrees of freedom of the standard errors (Student's t interval), or ``None`` when
    they come from known measurement errors (normal interval)."""

    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    r2: float
    n_points: int
    dof: int | None = None

    def slope_ci(self, level: float = LEVEL) -> Estimate:
        """The slope and its interval at ``level`` (t with ``dof`` degrees of freedom, else normal);
        NaN stays NaN (a claim on it is then decided on a NaN interval, never PASS)."""
        q = sps.norm.ppf(0.5 + level / 2) if self.dof is None else sps.t.ppf(0.5 + level / 2, max(self.dof, 1))
        w = float(q) * self.slope_se
        what = "normal" if self.dof is None else f"t ({self.dof} dof)"
        return Estimate(self.slope, self.slope - w, self.slope + w, level, f"fitted slope, {what} interval")


def wls(X: np.ndarray, y: np.ndarray, sigma: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Weighted least squares ``y ~ X c``: coefficients, their covariance, and R^2.

    With ``sigma`` (known standard errors of ``y``) the covariance is ``(X^T W X)^{-1}``,
    ``W = diag(sigma^-2)``; without, ordinary least squares with the residual variance.
    """
    X, y = np.asarray(X, float), np.asarray(y, float)
    if X.ndim == 1:
        X = X[:, None]
    n, k = X.shape
    if n < k:
        raise ValueError(f"points={n} is invalid: accepted at least {k} points for {k} coefficients")
    w = np.ones(n) if sigma is None else 1.0 / np.asarray(sigma, float) ** 2
    Xw = X * np.sqrt(w)[:, None]
    yw = y * np.sqrt(w)
    coef, *_ = np.linalg.lstsq(Xw, yw, rcond=None)
    res = yw - Xw @ coef
    XtWX_inv = np.linalg.pinv(Xw.T @ Xw)
    if sigma is None:
        dof = max(n - k, 1)
        cov = XtWX_inv * (res @ res) / dof
    else:
        cov = XtWX_inv
    ybar = np.average(y, weights=w)
    ss_tot = float(np.sum(w * (y - ybar) ** 2))
    r2 = 1.0 - float(res @ res) / ss_tot if ss_tot > 0 else 1.0
    return coef, cov, r2


def loglog_fit(x, y, y_se=None, invalid: str = "raise") -> Fit:
    """Fit ``log y = intercept + slope log x`` (natural logs); ``y_se`` gives weights ``y / y_se``.

    ``invalid``: what to do when some ``x`` or ``y`` is not a positive finite number (a diverged
    run, a Monte Carlo gap below its noise): ``"raise"`` a ``ValueError``, or ``"nan"``: return a
    fit whose numbers are all NaN (chapter 8 then reports the claim as failed).
    """
    check_choice("invalid", invalid, ("raise", "nan"))
    x, y = np.asarray(x, float), np.asarray(y, float)
    if invalid == "nan" and not (np.all(np.isfinite(x) & (x > 0)) and np.all(np.isfinite(y) & (y > 0))):
        nan = float("nan")
        return Fit(nan, nan, nan, nan, nan, len(x))
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x, y are invalid: accepted positive values for a log-log fit")
    sig = None if y_se is None else np.asarray(y_se, float) / y
    X = np.stack([np.ones_like(x), np.log(x)], 1)
    coef, cov, r2 = wls(X, np.log(y), sig)
    return Fit(float(coef[1]), float(coef[0]), float(math.sqrt(cov[1, 1])), float(math.sqrt(cov[0, 0])), r2, len(x),
               None if y_se is not None else max(len(x) - 2, 1))


class RateFit(NamedTuple):
    """``L(theta_t) - L* ~ C mu^t`` fitted on ``t0 <= t <= t1`` (Theorem 2 of paper 2)."""

    mu: float  # fitted rate per iteration
    mu_se: float  # its standard error (delta method)
    r2: float  # straight-line fit quality on the log scale
    t0: int
    t1: int

    def ci(self, level: float = LEVEL) -> Estimate:
        """``mu`` and its t interval (``t1 - t0 - 1`` degrees of freedom of the line fit)."""
        q = float(sps.t.ppf(0.5 + level / 2, max(self.t1 - self.t0 - 1, 1)))
        return Estimate(self.mu, self.mu - q * self.mu_se, self.mu + q * self.mu_se, level,
                        f"fitted rate over t in [{self.t0}, {self.t1}], t interval")


def geometric_rate(excess, lo: float = 1e-24, hi_rel: float = 1e-3, min_points: int = 10) -> RateFit:
    """Fit the geometric rate of an excess-loss curve ``excess (T+1,)`` (chapter 8).

    The window skips the transient -- it starts where the excess first falls below ``hi_rel``
    times its initial value -- and stops before the curve reaches ``lo`` (round-off).  If that
    window has fewer than ``min_points`` iterations (a slow method), the last half of the run is
    used instead.  Returns ``mu = exp(slope)`` of ``log excess`` against ``t``.
    """
    e = torch.as_tensor(excess, dtype=torch.float64).cpu().numpy()
    check_float("lo", lo, 0.0, lo_open=True)
    if not np.all(np.isfinite(e)) or np.any(e <= 0):
        bad = int(np.argmin(np.isfinite(e) & (e > 0)))
        e = e[:bad]
    T = len(e) - 1
    if T < 2:
        return RateFit(float("nan"), float("nan"), float("nan"), 0, T)
    below = np.nonzero(e <= hi_rel * e[0])[0]
    t0 = int(below[0]) if len(below) else T + 1
    above = np.nonzero(e >= lo)[0]
    t1 = int(above[-1]) if len(above) else 0
    if t1 - t0 + 1 < min_points:
        t0, t1 = T // 2, int(above[-1]) if len(above) else T
        t0 = min(t0, max(t1 - min_points + 1, 0))
    t = np.arange(t0, t1 + 1, dtype=float)
    X = np.stack([np.ones_like(t), t], 1)
    coef, cov, r2 = wls(X, np.log(e[t0 : t1 + 1]))
    mu = math.exp(coef[1])
    return RateFit(mu, mu * math.sqrt(cov[1, 1]), r2, t0, t1)


def growth_rate(values, lo: float, hi: float) -> RateFit:
    """Fit ``values_t ~ C g^t`` on the first run of iterations with ``lo <= values_t <= hi``.

    Used for the growth of ``||theta_t||`` away from the saddle ``theta = 0`` (chapter 8).
    """
    v = torch.as_tensor(values, dtype=torch.float64).cpu().numpy()
    inside = (v >= lo) & (v <= hi)
    idx = np.nonzero(inside)[0]
    if len(idx) < 3:
        return RateFit(float("nan"), float("nan"), float("nan"), 0, 0)
    t0 = int(idx[0])
    t1 = t0
    while t1 + 1 < len(v) and inside[t1 + 1]:
        t1 += 1
    t = np.arange(t0, t1 + 1, dtype=float)
    coef, cov, r2 = wls(np.stack([np.ones_like(t), t], 1), np.log(v[t0 : t1 + 1]))
    g = math.exp(coef[1])
    return RateFit(g, g * math.sqrt(cov[1, 1]), r2, t0, t1)


def slope_over_repetitions(x, Y, invalid: str = "raise") -> Fit:
    """Log-log slope fitted per repetition (columns of ``Y (N, R)``), then averaged.

    ``slope`` and ``intercept`` are the means over repetitions, ``slope_se`` the standard error
    of the mean slope (spread across repetitions, ``dof`` = repetitions - 1), ``r2`` the smallest
    per-repetition R^2.  With one
    repetition it is :func:`loglog_fit`; ``invalid`` as there (``"nan"``: a repetition with a value
    that is not positive makes the result NaN).
    """
    Y = torch.as_tensor(Y, dtype=torch.float64).cpu().numpy()
    if Y.ndim == 1:
        Y = Y[:, None]
    fits = [loglog_fit(x, Y[:, r], invalid=invalid) for r in range(Y.shape[1])]
    if len(fits) == 1:
        return fits[0]
    s = np.array([f.slope for f in fits])
    b = np.array([f.intercept for f in fits])
    return Fit(float(s.mean()), float(b.mean()), float(s.std(ddof=1) / math.sqrt(len(s))),
               float(b.std(ddof=1) / math.sqrt(len(b))), float(min(f.r2 for f in fits)), len(x), len(s) - 1)


def drift_z(series, blocks: int = 10) -> float:
    """Is a noisy series stationary?  ``z`` of the difference between the means of its second and
    first halves, with the standard error from ``blocks`` block means (chapter 8: has the excess
    loss reached a floor, or is it still moving?)."""
    v = torch.as_tensor(series, dtype=torch.float64).cpu().numpy()
    check_int("blocks", blocks, 4)
    if not np.all(np.isfinite(v)):
        return float("nan")  # a diverged run has no floor
    if blocks % 2:
        raise ValueError(f"blocks={blocks} is invalid: accepted an even integer >= 4")
    m = len(v) // blocks
    if m < 1:
        raise ValueError(f"series length={len(v)} is invalid: accepted at least blocks={blocks} values")
    b = v[len(v) - m * blocks :].reshape(blocks, m).mean(1)
    first, second = b[: blocks // 2], b[blocks // 2 :]
    se = math.sqrt(first.var(ddof=1) / len(first) + second.var(ddof=1) / len(second))
    return float((second.mean() - first.mean()) / se) if se > 0 else 0.0


def saddle_curvature(problem: Problem) -> torch.Tensor:
    """``sigma_1(M Sigma) lambda_1(Sigma)``, minus the smallest eigenvalue of the Hessian of ``L`` at
    ``theta = 0`` (the strict saddle of paper 2's population loss): ``(R,)``.

    Near 0, ``grad_A L = -M Sigma B Sigma`` and ``grad_B L = -Sigma M^T A Sigma``, an operator with
    eigenvalues ``+- sigma_i(M Sigma) lambda_j(Sigma)``; plain GD with step ``eta`` multiplies the
    top component by ``1 + eta sigma_1(M Sigma) lambda_1(Sigma)`` per step (chapter 8, Figure 4).
    """
    s = torch.linalg.matrix_norm(problem.M @ problem.Sigma, 2)
    return s * torch.linalg.eigvalsh(problem.Sigma)[:, -1]


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


def manifold_projection(problem: Problem, A: torch.Tensor, B: torch.Tensor, restarts: int = 0,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The projection of ``theta = (A, B)`` onto the manifold of minima ``S`` in the P-geometry
    (paper 2, Theorem 1(iii): the reference point ``theta*`` is the projection in the P-norm).

    Minimises ``||P^{1/2}(theta - theta(J))||_F`` over ``J in O(d)``, i.e. ``||Z - W* Omega
    Sigma^{-1/2}||_F`` with ``Z = [A; Sigma^{1/2} B]``, ``W* = [U; V] G^{1/2}``, ``Omega = J^T``,
    numerically, for all repetitions at once: from the whitened Procrustes solution, from it with
    one column flipped (the other component of ``O(d)``) and from ``restarts`` random rotations; the
    first is run to convergence, the others for 50 iterations and then to convergence where they
    are already better; the best is kept.  Returns ``(distance (R,), A(J) (R, p, d), B(J) (R, d, d))``.  Chapter 8.
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
    ||Delta||_P^2}``, each ``(R,)``: one-point strong convexity is ``a >= alpha``, one-point
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
    return {"dist": dist, "a": inner / d2, "b": sq / d2}


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


class LossMC(NamedTuple):
    """Monte Carlo of ``E[L_hat]`` at one sequence length (per repetition, ``(R,)`` each)."""

    n: int
    L_hat: torch.Tensor  # mean of L_hat over the K sequences
    L_hat_se: torch.Tensor  # its standard error
    L: torch.Tensor  # population loss (closed form)

    @property
    def gap(self) -> torch.Tensor:
        """``E[L_hat] - L`` estimated (standard error ``L_hat_se``)."""
        return self.L_hat - self.L


def mc_loss(problem: Problem, A, B, n: int, K: int, gen: torch.Generator) -> LossMC:
    """Monte Carlo of ``E[L_hat(theta)]`` over ``K`` fresh sequences of length ``n`` (paper 2, Section 4).

    Returns the mean and standard error per repetition next to the closed-form population loss
    ``L(theta)``, which is the ``n -> infinity`` limit.  Sequences are drawn in chunks to bound
    memory.  Used by chapter 8.
    """
    n = check_int("n", n, 1)
    K = check_int("K", K, 2)
    chunk = max(1, 2**22 // (problem.R * n * n))
    vals = []
    left = K
    while left > 0:
        k = min(chunk, left)
        X, Y = sample(problem, k, n, gen)  # (R, k, n, d), (R, k, n, p)
        vals.append(0.5 * (predict(X, A, B) - Y).pow(2).sum(-1).mean(-1))  # (R, k) L_hat per sequence
        left -= k
    v = torch.cat(vals, 1)  # (R, K)
    L = population_loss(A, B, problem.M, problem.Sigma, problem.noise_var)
    return LossMC(n, v.mean(1), v.std(1) / math.sqrt(K), L)


class BiasMC(NamedTuple):
    """Monte Carlo of the oracle's bias ``||E[grad Q_hat(theta)] - grad Q(theta)||_F^2`` at one
    sequence length (paper 2, Theorem 3), per repetition ``(R,)``."""

    n: int
    b2: torch.Tensor  # unbiased estimate of the squared bias
    se: torch.Tensor  # its standard error (delta method)
    noise: torch.Tensor  # tr Cov / K, the part of ||mean gradient - grad Q||^2 due to sampling


def gradient_bias(problem: Problem, A, B, n: int, K: int, gen: torch.Generator, regularised: bool = True) -> BiasMC:
    """Monte Carlo of Theorem 3's ``||E[grad Q_hat(theta)] - grad Q(theta)||_F^2`` over ``K`` fresh
    sequences of length ``n`` (paper 2, Section 5 and Appendix C).

    With ``v_k = grad Q_hat_k(theta) - grad Q(theta)`` per sequence (``Q_hat = L_hat + R_hat``, the
    sequence's ``Sigma_hat`` in ``R_hat``; closed-form ``grad Q``), ``||mean v||^2 - tr Cov(v) / K``
    is unbiased for the squared bias; its standard error is ``2 sqrt(mean^T Cov mean / K)``.
    Sequences are drawn in chunks to bound memory.  Chapter 8.
    """
    n, K = check_int("n", n, 2), check_int("K", K, 2)
    gA0, gB0 = population_grad(A, B, problem.M, problem.Sigma, regularised)
    chunk = max(1, 2**22 // (problem.R * n * n))
    vs, left = [], K
    while left > 0:
        k = min(chunk, left)
        X, Y = sample(problem, k, n, gen)  # (R, k, n, d), (R, k, n, p)
        gA, gB = empirical_loss_grad(A, B, X, Y, per_sequence=True)  # (R, k, p, d), (R, k, d, d)
        if regularised:
            rA, rB = regulariser_grad(A, B, transpose(X) @ X / n, per_sequence=True)
            gA, gB = gA + rA, gB + rB
        vs.append(torch.cat([(gA - gA0[:, None]).flatten(2), (gB - gB0[:, None]).flatten(2)], -1))
        left -= k
    v = torch.cat(vs, 1)  # (R, K, D)
    m = v.mean(1)
    c = v - m[:, None]
    cov = transpose(c) @ c / (K - 1)  # (R, D, D)
    noise = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1) / K
    se = 2 * ((m[:, None] @ cov @ m[..., None]).reshape(-1).clamp_min(0) / K).sqrt()
    return BiasMC(n, m.pow(2).sum(-1) - noise, se, noise)


# ------------------------------------------------------------------------------ chapter 8's fits
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


def gap_fits(gap: dict, n_min: int = 32) -> dict[str, Fit]:
    """Log-log fit of ``E[L_hat] - L`` against ``n >= n_min`` for every point of
    :func:`icl_lib.paper2.experiments.loss_gap_vs_n`'s result (first repetition), weighted by the
    Monte Carlo standard errors: is the gap of order ``1/n``?  NaN where some gap is not positive
    (below the Monte Carlo noise).  Chapter 8 (paper 2, Section 4)."""
    fits = {}
    for label, res in gap.items():
        ns, se = res["n"].numpy(), res["se"][:, 0].numpy()
        big = ns >= n_min
        fits[label] = loglog_fit(ns[big], res["gap"][big, 0].numpy(), se[big], invalid="nan")
    return fits


def gap_extrapolation(gap: dict) -> dict[str, dict]:
    """Fit ``E[L_hat](n) - L = c0 + c1 / n + c2 / n^2`` by weighted least squares (Monte Carlo
    standard errors) for every point of :func:`~icl_lib.paper2.experiments.loss_gap_vs_n`'s result
    (first repetition).  ``L`` is the ``n -> infinity`` limit when ``c0 = 0`` within its error.

    Returns ``{label: {"c0", "c0_se", "c1", "c0_z"}}`` with ``c0_z = |c0| / se(c0)``.  Chapter 8
    (paper 2, Section 4).
    """
    out = {}
    for label, res in gap.items():
        ns, y, se = res["n"].numpy(), res["gap"][:, 0].numpy(), res["se"][:, 0].numpy()
        coef, cov, _ = wls(np.stack([np.ones_like(ns), 1 / ns, 1 / ns**2], 1), y, se)
        c0_se = math.sqrt(cov[0, 0])
        out[label] = {"c0": coef[0], "c0_se": c0_se, "c1": coef[1], "c0_z": abs(coef[0]) / c0_se}
    return out


class SaddleFit(NamedTuple):
    """Plain GD near the saddle ``theta = 0``, measured against its curvature (chapter 8)."""

    g_pred: float  # predicted growth factor per step, 1 + eta sigma_1(M Sigma) lambda_1(Sigma)
    growth: RateFit  # measured growth of ||theta_t|| from the smallest start
    x_log: np.ndarray  # (S,) ln(1 / eps) of the starts
    t_escape: np.ndarray  # (S,) escape times
    slope: float  # fitted escape time per e-fold of 1 / eps (the largest start left out)
    slope_se: float
    slope_pred: float  # 1 / ln(g_pred)
    L0: float  # L(0) - L*, the plateau

    def growth_ci(self, level: float = LEVEL) -> Estimate:
        """Measured over predicted growth factor, with the growth fit's t interval."""
        e = self.growth.ci(level)
        return Estimate(e.value / self.g_pred, e.lo / self.g_pred, e.hi / self.g_pred, level,
                        "measured / predicted growth factor, t interval of the fit")

    def plateau_ci(self, level: float = LEVEL) -> Estimate:
        """Fitted over predicted escape-time slope, with the fit's t interval (points - 2 dof)."""
        dof = max(len(self.x_log) - 3, 1)  # the largest start is left out of the fit
        w = float(sps.t.ppf(0.5 + level / 2, dof)) * self.slope_se
        return Estimate(self.slope / self.slope_pred, (self.slope - w) / self.slope_pred,
                        (self.slope + w) / self.slope_pred, level,
                        f"fitted / predicted escape-time slope, t interval ({dof} dof)")


def saddle_fit(problem: Problem, esc: dict) -> SaddleFit:
    """Fits of :func:`~icl_lib.paper2.experiments.escape_vs_init_scale`'s runs (first problem):
    the growth of ``||theta_t||`` from the smallest start while it runs from 100 times its start to
    1 % of the spectral start's norm, and the escape time against ``ln(1/eps)`` without the largest
    start (which is not small), next to their predictions from :func:`saddle_curvature`.  Chapter 8
    (paper 2, Section 1.1: the spurious stationary point)."""
    g_pred = 1 + esc["eta"].item() * saddle_curvature(problem).item()
    norms = esc["theta_norm"][-1, :, 0]  # (T+1,) smallest start
    growth = growth_rate(norms, 100 * norms[0].item(), 1e-2 * esc["start_norm"].item())
    x_log = np.log(1 / esc["scale"].numpy())
    t_esc = esc["t_escape"][:, 0].numpy()
    coef, cov, _ = wls(np.stack([np.ones_like(x_log), x_log], 1)[1:], t_esc[1:])
    return SaddleFit(g_pred, growth, x_log, t_esc, float(coef[1]), math.sqrt(cov[1, 1]), 1 / math.log(g_pred),
                     esc["L0"].item())


def limit_estimate(ext: dict, L: float, level: float = LEVEL) -> Estimate:
    """The extrapolated ``n -> infinity`` gap ``c0`` of :func:`gap_extrapolation` (one point's entry)
    relative to the population loss ``L`` there, with its normal interval: ``L`` is the limit of
    ``E[L_hat]`` when it is 0 (paper 2, Section 4; chapter 8)."""
    z = float(sps.norm.ppf(0.5 + level / 2))
    c0, se = float(ext["c0"]), float(ext["c0_se"])
    return Estimate(c0 / L, (c0 - z * se) / L, (c0 + z * se) / L, level,
                    "extrapolated gap c0 / L, normal interval (weighted fit)")


def transient_rate_ratio(finite, floor, population, above: float = 3.0, min_points: int = 3) -> dict:
    """How fast the finite-n oracle's excess approaches its floor, against the population oracle's
    from the same start (paper 2, Theorem 2's ``mu^m`` term at finite ``n``; chapter 8).

    For every repetition, over ``t = 0 .. t_end - 1`` where the finite run's excess above its
    floor is still above ``above`` times the floor, fits ``log(excess_fin - floor)`` and
    ``log(excess_pop)`` against ``t``; returns ``{"ratio": log-rate ratio fin / pop (R,),
    "mu_fin", "mu_pop", "t_end"}`` (NaN where the window has fewer than ``min_points``).  Near a
    floor the excess approaches it linearly in the distance, at the square root of the population
    rate: a ratio of 1/2; far from it, at the population rate: 1.
    """
    fin = torch.as_tensor(finite, dtype=torch.float64).cpu().numpy()
    pop = torch.as_tensor(population, dtype=torch.float64).cpu().numpy()
    f = torch.as_tensor(floor, dtype=torch.float64).cpu().numpy()
    R = fin.shape[1]
    ratio, mu_f, mu_p, t_end = (np.full(R, np.nan) for _ in range(4))
    for r in range(R):
        e = fin[:, r] - f[r]
        ok = np.isfinite(e) & (e > above * f[r])
        te = int(np.argmin(ok)) if not ok.all() else len(e)
        t_end[r] = te
        if te < min_points or np.any(pop[:te, r] <= 0):
            continue
        t = np.arange(te, dtype=float)
        X = np.stack([np.ones_like(t), t], 1)
        s_f = wls(X, np.log(e[:te]))[0][1]
        s_p = wls(X, np.log(pop[:te, r]))[0][1]
        ratio[r], mu_f[r], mu_p[r] = s_f / s_p, math.exp(s_f), math.exp(s_p)
    return {"ratio": ratio, "mu_fin": mu_f, "mu_pop": mu_p, "t_end": t_end}


def one_point_summary(scan: dict, near: float = 0.1, frac: float = 0.5) -> dict:
    """Theorem 1(iii)'s checks on :func:`~icl_lib.paper2.experiments.one_point_scan`'s result:
    ``a_min`` = the smallest ``a / alpha`` and ``b_max`` = the largest ``b / beta`` over the points
    at distance ``r <= near``; ``radius`` = the largest scanned ``r`` up to which every point has
    ``a >= frac alpha`` (the measured neighbourhood; 0 if the first already fails).  Chapter 8."""
    check_float("near", near, 0.0, lo_open=True)
    r = scan["r"].numpy()
    a, b = scan["a"].numpy() / scan["alpha"], scan["b"].numpy() / scan["beta"]
    sel = r <= near
    radius = 0.0
    for k in np.argsort(r):
        if np.all(a[k] >= frac):
            radius = float(r[k])
        else:
            break
    return {"a_min": float(a[sel].min()), "b_max": float(b[sel].max()), "radius": radius,
            "a_min_per_r": a.min(1), "b_max_per_r": b.max(1)}


class FloorFit(NamedTuple):
    """The error floor of Algorithm 1 against ``n`` and the bound of Theorem 2 (chapter 8)."""

    fit: Fit  # log-log slope of the floor, per problem then averaged
    n_mid: float  # geometric middle of the range of n
    slope_bound: float  # local log-log slope of n^-2 log^6 n at n_mid, -2 + 6 / ln(n_mid)
    k: float  # fitted log power in floor ~ n^-2 (log n)^k (on the mean floor)
    k_se: float

    @property
    def z_two(self) -> float:
        """How many standard errors the floor's slope lies from ``-2``."""
        return (self.fit.slope + 2) / self.fit.slope_se


def floor_fit(fl: dict) -> FloorFit:
    """Fits of :func:`~icl_lib.paper2.experiments.floor_vs_n`'s floors ``(N, R)``: the log-log
    slope (:func:`slope_over_repetitions`), the bound's local slope, and the power ``k`` of
    ``floor ~ n^-2 (log n)^k`` fitted on the mean floor; NaN where a floor is not positive and
    finite (Algorithm 1 diverged).  Chapter 8 (paper 2, Theorem 2)."""
    nf = fl["n"].numpy()
    fit = slope_over_repetitions(nf, fl["floor"], invalid="nan")
    n_mid = math.exp(np.log(nf).mean())
    mean = fl["floor"].mean(1).numpy()  # (N,)
    if not np.all(np.isfinite(mean) & (mean > 0)):  # a diverged run
        return FloorFit(fit, n_mid, -2 + 6 / math.log(n_mid), float("nan"), float("nan"))
    coef, cov, _ = wls(np.stack([np.ones_like(nf), np.log(np.log(nf))], 1), np.log(mean * nf**2))
    return FloorFit(fit, n_mid, -2 + 6 / math.log(n_mid), float(coef[1]), math.sqrt(cov[1, 1]))


# ------------------------------------------------------------------------------ chapter 8's estimates
def floor_drift(excess, blocks: int = 10, level: float = LEVEL) -> Estimate:
    """Has the excess reached a floor?  For every repetition (columns of ``excess (T, R)``, the
    iterations to judge), the relative drift ``(mean of the last half - mean of the first half) /
    mean``, computed on ``blocks`` block means; their mean over repetitions with its t interval.
    A floor has a drift near 0; a curve still falling has a clearly negative one.  More noise makes
    the interval wider (the data then cannot decide), never the verdict easier.  Paper 2, Theorem 2;
    chapter 8."""
    check_int("blocks", blocks, 2)
    v = torch.as_tensor(excess, dtype=torch.float64).cpu().numpy()
    if v.ndim == 1:
        v = v[:, None]
    m = v.shape[0] // blocks
    if m < 1:
        raise ValueError(f"iterations={v.shape[0]} is invalid: accepted at least blocks={blocks} values")
    if not np.all(np.isfinite(v)):
        nan = float("nan")
        return Estimate(nan, nan, nan, level, "a diverged run has no floor")
    b = v[v.shape[0] - m * blocks :].reshape(blocks, m, -1).mean(1)  # (blocks, R)
    h = blocks // 2
    drift = (b[blocks - h :].mean(0) - b[:h].mean(0)) / b.mean(0)
    e = mean_ci(drift, level)
    return Estimate(e.value, e.lo, e.hi, level, f"relative drift, mean over {len(drift)} problems, t interval")


def one_point_fractions(scan: dict, near: float = 0.1, a_frac: float = 0.5, b_factor: float = 2.0,
                        level: float = LEVEL) -> dict[str, Estimate]:
    """Theorem 1(iii) on the random directions of :func:`~icl_lib.paper2.experiments.one_point_scan`
    at the distances ``r <= near``: the fraction of them with one-point strong convexity
    ``a >= a_frac alpha`` (``"convexity"``) and with one-point smoothness ``b <= b_factor beta``
    (``"smoothness"``), each with its Clopper-Pearson interval.  ``alpha, beta`` are the local
    constants of the Hessian across ``S``; a fraction near 1 is the theorem's "for all directions"
    within the stated factors.  Chapter 8."""
    check_float("near", near, 0.0, lo_open=True)
    from ..stats import proportion_ci

    k = scan["n_random"]
    sel = scan["r"].numpy() <= near
    if k < 1 or not sel.any():
        raise ValueError(f"near={near} is invalid: accepted a distance that covers at least one scanned point")
    a = scan["a"].numpy()[sel, :k] / scan["alpha"]
    b = scan["b"].numpy()[sel, :k] / scan["beta"]
    N = a.size
    return {"convexity": proportion_ci(int((a >= a_frac).sum()), N, level),
            "smoothness": proportion_ci(int((b <= b_factor).sum()), N, level)}


def finite_rate_ratio(fr: dict, above: float = 3.0, level: float = LEVEL) -> Estimate:
    """The log-rate ratio of :func:`transient_rate_ratio` on :func:`~icl_lib.paper2.experiments.finite_rate`'s
    runs, its mean over problems with the t interval: 1 when the finite-n oracle's excess above
    its floor falls at the population oracle's rate.  NaN (never PASS) when some problem's window
    is too short to fit.  Paper 2, Theorem 2's ``mu^m`` term; chapter 8."""
    res = transient_rate_ratio(fr["finite"], fr["floor"], fr["population"], above)
    r = res["ratio"]
    if not np.all(np.isfinite(r)):
        nan = float("nan")
        return Estimate(nan, nan, nan, level, f"{int(np.sum(~np.isfinite(r)))} of {len(r)} windows too short")
    e = mean_ci(r, level)
    return Estimate(e.value, e.lo, e.hi, level, f"log-rate ratio, mean over {len(r)} problems, t interval")
