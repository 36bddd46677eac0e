"""The fits and the claims' estimates of chapter 8's experiments (paper 2, Theorems 1-3, Lemma 3).

Each function reads the result of one driver of :mod:`icl_lib.paper2.experiments` with the fits of
:mod:`icl_lib.paper2.fits` and the intervals of :mod:`icl_lib.stats`:

* :func:`gap_fits`, :func:`gap_extrapolation`, :func:`limit_estimate`, :func:`limit_rival` -- the
  gap ``E[L_hat] - L`` against ``n``, its extrapolation ``n -> infinity`` (Section 4) and the
  rival of that limit;
* :class:`SaddleFit`, :func:`saddle_fit` -- plain GD near the saddle against its curvature (and
  against the next mode's, the rival);
* :func:`transient_rate_ratio`, :func:`finite_rate_ratio` -- how fast the finite-n oracle's
  excess approaches its floor against the population oracle's (Theorem 2's ``mu^m``);
* :func:`one_point_summary`, :func:`one_point_fractions` -- Theorem 1(iii) near ``S``;
* :class:`FloorFit`, :func:`floor_fit`, :func:`floor_drift`, :func:`geometric_drift` -- the error
  floor of Algorithm 1 against ``n`` and the bound of Theorem 2, whether the excess has reached a
  floor, and the drift of a curve that has none (the rival).

Used by chapter 8.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats as sps

from ..stats import LEVEL, Estimate, mean_ci
from ..validate import check_float, check_int
from .data import Problem
from .fits import Fit, RateFit, growth_rate, loglog_fit, slope_over_repetitions, wls
from .manifold import saddle_curvature, saddle_curvatures

__all__ = [
    "gap_fits",
    "gap_extrapolation",
    "SaddleFit",
    "saddle_fit",
    "FloorFit",
    "limit_estimate",
    "limit_rival",
    "geometric_drift",
    "transient_rate_ratio",
    "one_point_summary",
    "floor_fit",
    "floor_drift",
    "one_point_fractions",
    "finite_rate_ratio",
]


# ------------------------------------------------------------------------------ chapter 8's fits
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
    g_second: float = float("nan")  # the next mode's growth factor, 1 + eta times the second curvature

    def growth_ci(self, level: float = LEVEL) -> Estimate:
        """Measured over predicted growth factor, with the growth fit's t interval."""
        e = self.growth.ci(level)
        return Estimate(e.value / self.g_pred, e.lo / self.g_pred, e.hi / self.g_pred, level,
                        "measured / predicted growth factor, t interval of the fit")

    def growth_rival(self) -> float:
        """The rival of :meth:`growth_ci`: the next mode's growth factor over the predicted (a
        window that measures the second mode, not the top one)."""
        return self.g_second / self.g_pred

    def plateau_rival(self) -> float:
        """The rival of :meth:`plateau_ci`: the escape-time slope the next mode would give,
        ``1 / ln(g_second)``, over the predicted ``1 / ln(g_pred)``."""
        return math.log(self.g_pred) / math.log(self.g_second)

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
    start (which is not small), next to their predictions from
    :func:`~icl_lib.paper2.manifold.saddle_curvature`, and the next mode's growth factor (the
    rival).  Chapter 8 (paper 2, Section 1.1: the spurious stationary point)."""
    g_pred = 1 + esc["eta"].item() * saddle_curvature(problem).item()
    g_second = 1 + esc["eta"].item() * saddle_curvatures(problem)[0, 1].item()
    norms = esc["theta_norm"][-1, :, 0]  # (T+1,) smallest start
    growth = growth_rate(norms, 100 * norms[0].item(), 1e-2 * esc["start_norm"].item())
    x_log = np.log(1 / esc["scale"].numpy())
    t_esc = esc["t_escape"][:, 0].numpy()
    coef, cov, _ = wls(np.stack([np.ones_like(x_log), x_log], 1)[1:], t_esc[1:])
    return SaddleFit(g_pred, growth, x_log, t_esc, float(coef[1]), math.sqrt(cov[1, 1]), 1 / math.log(g_pred),
                     esc["L0"].item(), g_second)


def limit_estimate(ext: dict, L: float, level: float = LEVEL) -> Estimate:
    """The extrapolated ``n -> infinity`` gap ``c0`` of :func:`gap_extrapolation` (one point's entry)
    relative to the population loss ``L`` there, with its normal interval: ``L`` is the limit of
    ``E[L_hat]`` when it is 0 (paper 2, Section 4; chapter 8)."""
    z = float(sps.norm.ppf(0.5 + level / 2))
    c0, se = float(ext["c0"]), float(ext["c0_se"])
    return Estimate(c0 / L, (c0 - z * se) / L, (c0 + z * se) / L, level,
                    "extrapolated gap c0 / L, normal interval (weighted fit)")


def limit_rival(res: dict) -> float:
    """The rival of :func:`limit_estimate` at one point of
    :func:`~icl_lib.paper2.experiments.loss_gap_vs_n`'s result (first repetition): the relative gap
    ``(E[L_hat] - L) / L`` at the largest ``n``, the value ``c0 / L`` would take if the training
    loss stopped there instead of approaching ``L``.  Paper 2, Section 4; chapter 8."""
    return float(res["gap"][-1, 0] / res["L"][0])


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
    slope (:func:`~icl_lib.paper2.fits.slope_over_repetitions`), the bound's local slope, and the power ``k`` of
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
    drift = _drifts(v, blocks)
    e = mean_ci(drift, level)
    return Estimate(e.value, e.lo, e.hi, level, f"relative drift, mean over {len(drift)} problems, t interval")


def _drifts(v: np.ndarray, blocks: int) -> np.ndarray:
    """The relative drift of each column of ``v (T, R)`` (see :func:`floor_drift`)."""
    m = v.shape[0] // blocks
    b = v[v.shape[0] - m * blocks :].reshape(blocks, m, -1).mean(1)  # (blocks, R)
    h = blocks // 2
    return (b[blocks - h :].mean(0) - b[:h].mean(0)) / b.mean(0)


def geometric_drift(mu: float, iterations: int, blocks: int = 10) -> float:
    """The relative drift :func:`floor_drift` gives a curve with no floor, one that keeps falling as
    ``mu^t`` over ``iterations``: the rival of a floor (near -2 for a fast rate).  Paper 2,
    Theorem 2; chapter 8."""
    check_float("mu", mu, 0.0, 1.0, lo_open=True, hi_open=True)
    check_int("iterations", iterations, blocks)
    return float(_drifts(mu ** np.arange(iterations, dtype=float)[:, None], blocks)[0])


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
