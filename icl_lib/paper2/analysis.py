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

from ..seeding import generator
from ..validate import check_choice, check_float, check_int
from .data import Problem, sample
from .loss import population_loss, predict, transpose

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
    "LossMC",
    "mc_loss",
    "whitened_perturbation",
    "gap_fits",
    "gap_extrapolation",
    "SaddleFit",
    "saddle_fit",
    "FloorFit",
    "floor_fit",
]


class Fit(NamedTuple):
    """A straight-line fit ``y = intercept + slope x`` with standard errors."""

    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    r2: float
    n_points: int


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
    return Fit(float(coef[1]), float(coef[0]), float(math.sqrt(cov[1, 1])), float(math.sqrt(cov[0, 0])), r2, len(x))


class RateFit(NamedTuple):
    """``L(theta_t) - L* ~ C mu^t`` fitted on ``t0 <= t <= t1`` (Theorem 2 of paper 2)."""

    mu: float  # fitted rate per iteration
    mu_se: float  # its standard error (delta method)
    r2: float  # straight-line fit quality on the log scale
    t0: int
    t1: int


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
    of the mean slope (spread across repetitions), ``r2`` the smallest per-repetition R^2.  With one
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
               float(b.std(ddof=1) / math.sqrt(len(b))), float(min(f.r2 for f in fits)), len(x))


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


def manifold_distance(problem: Problem, A: torch.Tensor, B: torch.Tensor, geometry: str = "P",
                      restarts: int = 4, seed: int = 0) -> torch.Tensor:
    """Distance from ``theta = (A, B)`` to the manifold of minima ``S``, ``(R,)`` (chapter 8).

    ``geometry="P"``: ``min_J ||P^{1/2}(theta - theta(J))||_F`` with ``P = diag(I_p, Sigma)`` (the
    norm of paper 2's Lemma 3 and Theorem 2), i.e. ``min_Omega ||Z - W* Omega Sigma^{-1/2}||_F``
    with ``Z = [A; Sigma^{1/2} B]``, ``W* = [U; V] G^{1/2}``, minimised numerically over the
    orthogonal group (both components, ``restarts`` random starts besides the whitened solution).
    ``geometry="whitened"``: ``min_J ||W - W*(J)||_F`` in ``W = [A Sigma^{1/2}; Sigma^{1/2} B Sigma^{1/2}]``,
    an orthogonal Procrustes problem solved in closed form.
    """
    from scipy.optimize import minimize

    check_choice("geometry", geometry, ("P", "whitened"))
    check_int("restarts", restarts, 0, 1000)
    U, G, V = _svd_target(problem)
    W_star = torch.cat([U, V], -2) @ torch.diag_embed(G.sqrt())  # (R, p+d, d)
    Sh = problem.Sigma_half
    W = torch.cat([A @ Sh, Sh @ B @ Sh], -2)
    d_w, Omega_w = _procrustes(W, W_star)
    if geometry == "whitened":
        return d_w
    Z = torch.cat([A, Sh @ B], -2).cpu()
    Sm = torch.linalg.inv(Sh).cpu()
    Ws, Om = W_star.cpu(), Omega_w.cpu()
    d = problem.d
    iu = torch.triu_indices(d, d, 1)
    gen = generator(seed, "manifold-restarts")
    out = torch.empty(problem.R, dtype=A.dtype)
    for r in range(problem.R):
        flip = torch.eye(d, dtype=A.dtype)
        flip[0, 0] = -1
        starts = [Om[r], Om[r] @ flip]
        for _ in range(restarts):
            Q, Rr = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=A.dtype))
            starts.append(Q * torch.sign(torch.diagonal(Rr)))
        best = math.inf
        for O0 in starts:

            def f(v, O0=O0, r=r):
                s = torch.zeros(d, d, dtype=A.dtype)
                vt = torch.as_tensor(v, dtype=A.dtype).requires_grad_(True)
                s = s.index_put((iu[0], iu[1]), vt)
                Omega = O0 @ torch.linalg.matrix_exp(s - s.T)
                val = (Z[r] - Ws[r] @ Omega @ Sm[r]).pow(2).sum()
                (g,) = torch.autograd.grad(val, vt)
                return val.item(), g.numpy()

            res = minimize(f, np.zeros(len(iu[0])), jac=True, method="BFGS", options={"gtol": 1e-12})
            best = min(best, float(res.fun))
        out[r] = math.sqrt(max(best, 0.0))
    return out.to(A.device)


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
