"""Straight-line fits with standard errors: slopes, geometric rates, drifts (paper 2, Theorem 2, Lemma 3).

Goel, Soltanolkotabi, Bartlett (2026):

* :class:`Fit`, :func:`wls`, :func:`loglog_fit` -- (weighted) least squares with standard errors,
  for the slopes of chapter 8 (error floor against ``n``, Theorem 2; distance of the spectral start
  against ``n``, Lemma 3; rate against the condition number), and :func:`slope_over_repetitions`,
  a log-log slope per repetition, averaged;
* :class:`RateFit`, :func:`geometric_rate`, :func:`growth_rate` -- the rate ``mu`` of
  ``L(theta_t) - L* ~ mu^t`` (Theorem 2) fitted as a straight line on a log scale, with its R^2,
  and the growth rate of a series;
* :func:`drift_z` -- whether a noisy series is stationary.

Used by chapter 8 (its figures: :mod:`icl_lib.figures.curves`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy import stats as sps

from ..stats import LEVEL, Estimate
from ..validate import check_choice, check_float, check_int

__all__ = [
    "Fit",
    "RateFit",
    "wls",
    "loglog_fit",
    "geometric_rate",
    "growth_rate",
    "slope_over_repetitions",
    "drift_z",
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
