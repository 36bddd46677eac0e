"""Intervals of single measurements: medians, means, fractions, paired losses and fitted slopes.

* :func:`median_ci`     -- a distribution-free interval for the median over seeds, from order
  statistics (exact coverage for continuous data, valid for any sample size);
* :func:`censored_median_ci` -- the same for a time some seeds never reach (right-censored;
  chapter 9's time to the pattern);
* :func:`mean_ci`       -- Student's t interval for a mean (e.g. over independent test sets);
* :func:`proportion_ci` -- Clopper-Pearson (exact) or Wilson interval for a fraction of seeds;
* :func:`fraction_diff` -- the difference of two fractions of independent seeds (Newcombe's
  score interval; chapter 9);
* :func:`paired_diff`   -- the mean of paired differences on one shared test set and its standard
  error (two models, or a model and an estimator, scored on the same sequences);
* :func:`mean_se_from_sums` -- a mean and its standard error from running sums (the Monte Carlo of
  chapters 3 and 7);
* :func:`linear_slope`, :func:`loglog_slope` -- a least-squares slope (or power-law exponent) with
  its Student-t interval (chapter 9's time to the pattern against an axis of the grid).

Each returns an :class:`~icl_lib.stats.estimate.Estimate`.  All levels are two-sided 95 % unless
stated.  scipy provides the distributions.  Every chapter uses them.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
from scipy import stats as sps

from ..validate import check_float, check_int, fail
from .estimate import LEVEL, Estimate

__all__ = ["median_ci", "order_rank", "order_interval_at", "mean_ci", "proportion_ci", "sign_fraction", "paired_diff", "fraction_diff", "mean_se_from_sums",
           "censored_median_ci", "linear_slope", "loglog_slope"]


def _finite(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 0 or not np.isfinite(a).all():
        fail(name, list(a[:8]), "a non-empty sequence of finite numbers")
    return a


def median_ci(x: Sequence[float], level: float = LEVEL) -> Estimate:
    """The sample median and the widest-needed order-statistic interval ``[x_(k), x_(n+1-k)]`` whose
    coverage of the population median is at least ``level`` (binomial(n, 1/2) tail; for n = 6 this
    is ``[min, max]`` with coverage 96.9 %).  With too few values for ``level`` (n < 6 at 95 %) the
    interval is ``(-inf, inf)``: the data cannot bound the median."""
    a = np.sort(_finite("x", x))
    level = check_float("level", level, 0.0, 1.0, True, True)
    n = len(a)
    k = order_rank(n, level)
    lo, hi = (a[k - 1], a[n - k]) if k >= 1 else (-math.inf, math.inf)
    return Estimate(float(np.median(a)), float(lo), float(hi), level, f"median of {n}, order-statistic interval",
                    at_size=functools.partial(order_interval_at, a, a, level),
                    at_level=functools.partial(median_ci, a))


def order_rank(n: int, level: float = LEVEL) -> int:
    """The rank ``k`` of the order-statistic interval ``[x_(k), x_(n+1-k)]`` of a median of ``n``
    values at ``level``: the largest ``k`` with ``P(B <= k - 1) <= (1 - level) / 2``, ``B ~ Bin(n,
    1/2)``; 0 when ``n`` is too small to bound the median."""
    alpha = (1 - level) / 2
    # The first rank whose cdf exceeds alpha, found from the quantile function (at most n // 2, the
    # median's rank, as alpha < 1/2) and then checked against the cdf itself on both sides, so that
    # it is the rank a walk up from 0 would stop at (0 where even P(B = 0) exceeds alpha).
    k = int(sps.binom.ppf(alpha, n, 0.5))
    while k > 0 and sps.binom.cdf(k - 1, n, 0.5) > alpha:
        k -= 1
    while k < n // 2 and sps.binom.cdf(k, n, 0.5) <= alpha:
        k += 1
    return k


def order_interval_at(lows: Sequence[float], highs: Sequence[float], level: float, m: float) -> tuple[float, float]:
    """The order-statistic interval of a median (:func:`median_ci`, and of the seeds' own intervals,
    :func:`~icl_lib.stats.median_of`) with ``m`` times as many values drawn from the same spread:
    with ``N = m n`` values its ranks ``k`` and ``N + 1 - k`` (:func:`order_rank`) fall at the
    quantiles ``k / (N + 1)`` and ``(N + 1 - k) / (N + 1)``, read from the measured ``lows`` and
    ``highs`` (sorted; the values themselves for a median); at ``m = 1`` these are the measured
    ends.  A guide, as every extrapolation of an interval is: it assumes the values measured show
    the spread of those not yet measured."""
    n = len(lows)
    N = max(1, round(m * n))
    k = order_rank(N, level)
    if k < 1:
        return -math.inf, math.inf
    lo = float(np.quantile(np.asarray(lows, dtype=float), k / (N + 1), method="weibull"))
    hi = float(np.quantile(np.asarray(highs, dtype=float), (N + 1 - k) / (N + 1), method="weibull"))
    return lo, hi


def mean_ci(x: Sequence[float], level: float = LEVEL) -> Estimate:
    """The sample mean and Student's t interval (n >= 2)."""
    a = _finite("x", x)
    check_int("len(x)", len(a), 2)
    se = float(a.std(ddof=1) / math.sqrt(len(a)))
    t = float(sps.t.ppf(0.5 + level / 2, len(a) - 1))
    m = float(a.mean())
    return Estimate(m, m - t * se, m + t * se, level, f"mean of {len(a)}, t interval",
                    at_level=functools.partial(mean_ci, a))


def _cp(x: float, n: float, level: float) -> tuple[float, float]:
    """Clopper-Pearson bounds of ``x`` successes in ``n`` (``x`` may be fractional: a fraction kept
    exactly while ``n`` grows), from the beta quantiles."""
    a = (1 - level) / 2
    lo = 0.0 if x <= 0 else float(sps.beta.ppf(a, x, n - x + 1))
    hi = 1.0 if x >= n else float(sps.beta.ppf(1 - a, x + 1, n - x))
    return lo, hi


def _cp_at(k: int, n: int, level: float, m: float) -> tuple[float, float]:
    return _cp(k * m, n * m, level)


def proportion_ci(k: int, n: int, level: float = LEVEL, method: str = "exact") -> Estimate:
    """The fraction ``k / n`` and its Clopper-Pearson (``"exact"``) or Wilson interval."""
    n = check_int("n", n, 1)
    k = check_int("k", k, 0, n)
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=level, method=method)
    grow = functools.partial(_cp_at, k, n, level) if method == "exact" else None
    return Estimate(k / n, float(ci.low), float(ci.high), level, f"{k} of {n}, {method} binomial interval", grow,
                    at_level=lambda lv: proportion_ci(k, n, lv, method))


def sign_fraction(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Estimate:
    """The sign test of an order: among the pairs ``(a_i, b_i)`` that are not tied, the fraction
    with ``a_i < b_i``, with its exact interval (a claim "a comes before b" decided against the
    rival 0.5, "either order": ``Above(0.5)``).  Ties (equal at the resolution of the measurement,
    e.g. one logged snapshot) are counted and left out.  Chapter 3."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        fail("b", f"{len(b)} values", f"as many values as a ({len(a)})")
    k, m = int((a < b).sum()), int((a > b).sum())
    if k + m == 0:
        return Estimate(math.nan, 0.0, 1.0, level, f"no untied pair of {len(a)}")
    e = proportion_ci(k, k + m, level)
    return Estimate(e.value, e.lo, e.hi, level, f"{k} of {k + m} untied pairs earlier ({len(a) - k - m} tied), "
                    "exact binomial interval (sign test)", e.at_size,
                    at_level=lambda lv: sign_fraction(a, b, lv))


def _newcombe(k1: float, n1: float, k2: float, n2: float, level: float) -> tuple[float, float]:
    from statsmodels.stats.proportion import confint_proportions_2indep  # imported only for it

    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=1 - level)
    return float(lo), float(hi)


def _diff_at(k1: int, n1: int, k2: int, n2: int, level: float, m: float) -> tuple[float, float]:
    return _newcombe(k1 * m, n1 * m, k2 * m, n2 * m, level)


def fraction_diff(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> Estimate:
    """The difference ``k1/n1 - k2/n2`` of two fractions of independent seeds, with Newcombe's
    hybrid score interval (method 10 of Newcombe 1998, from the two Wilson intervals;
    ``statsmodels``' ``confint_proportions_2indep(method="newcomb")``): close to its level for
    every pair of true fractions, much shorter than the union of two exact intervals.  Chapter 9."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    k1, k2 = check_int("k1", k1, 0, n1), check_int("k2", k2, 0, n2)
    level = check_float("level", level, 0.0, 1.0, True, True)
    lo, hi = _newcombe(k1, n1, k2, n2, level)
    return Estimate(k1 / n1 - k2 / n2, lo, hi, level, f"{k1}/{n1} - {k2}/{n2}, Newcombe score interval",
                    functools.partial(_diff_at, k1, n1, k2, n2, level),
                    at_level=lambda lv: fraction_diff(k1, n1, k2, n2, lv))


def paired_diff(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Estimate:
    """Mean of ``a - b`` over shared test items (e.g. squared errors of two predictors on the same
    sequences) with its normal-approximation interval from the paired standard error."""
    a, b = _finite("a", a), _finite("b", b)
    if a.shape != b.shape or len(a) < 2:
        fail("b", f"{len(b)} values", f"as many paired values as a ({len(a)}, at least 2)")
    d = a - b
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    z = float(sps.norm.ppf(0.5 + level / 2))
    m = float(d.mean())
    return Estimate(m, m - z * se, m + z * se, level, f"paired mean over {len(d)}, normal interval",
                    at_level=functools.partial(paired_diff, a, b))


def mean_se_from_sums(s1, s2, n: int):
    """``(mean, standard error of the mean)`` of ``n`` values from their running sum ``s1`` and sum of
    squares ``s2`` (numbers, numpy arrays or torch tensors, element-wise): the sample variance
    ``(s2 - n mean^2) / (n - 1)``, clipped at 0 against round-off, over ``n``.  For Monte Carlo
    estimates accumulated chunk by chunk (chapters 3 and 7)."""
    n = check_int("n", n, 2)
    mean = s1 / n
    var = (s2 - n * mean**2) / (n - 1)
    return mean, ((abs(var) + var) / 2) ** 0.5 / math.sqrt(n)


# ------------------------------------------------------------------------------------ statistics
def censored_median_ci(times: Sequence, level: float = LEVEL) -> Estimate:
    """The median over seeds of a time that some seeds never reach within the budget (``None`` or
    ``inf`` or ``nan``: right-censored), with the order-statistic interval of
    :func:`~icl_lib.stats.median_ci`: it needs only the order of the values, so a censored seed counts as later than every observed
    one.  The median or an end of its interval is ``inf`` when it falls on censored seeds."""
    t = np.array([math.inf if v is None else float(v) for v in times], dtype=float)
    if t.size == 0:
        fail("times", list(times), "a non-empty sequence of numbers or None")
    t[np.isnan(t)] = math.inf  # None in a float column of pandas
    finite = t[np.isfinite(t)]
    if finite.size == t.size:
        return median_ci(t, level)
    a = np.sort(t)
    n = len(a)
    k = 0
    while k + 1 <= n // 2 and sps.binom.cdf(k, n, 0.5) <= (1 - level) / 2:
        k += 1
    lo, hi = (a[k - 1], a[n - k]) if k >= 1 else (-math.inf, math.inf)
    mid = a[(n - 1) // 2] if n % 2 else (a[n // 2 - 1] + a[n // 2]) / 2
    return Estimate(float(mid), float(lo), float(hi), level,
                    f"median of {n} ({n - finite.size} censored), order-statistic interval",
                    at_level=functools.partial(censored_median_ci, t))


def linear_slope(x: Sequence[float], y: Sequence[float], level: float = LEVEL) -> Estimate:
    """The least-squares slope of ``y`` on ``x`` with its Student-t interval (n - 2 degrees of
    freedom); with fewer than 3 points or no spread in ``x`` the interval is ``(-inf, inf)``."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or not (np.isfinite(x).all() and np.isfinite(y).all()):
        fail("y", f"{len(y)} values", f"as many finite values as x ({len(x)})")
    if len(x) < 3 or np.ptp(x) == 0:
        return Estimate(math.nan, -math.inf, math.inf, level, f"slope of {len(x)} points: undetermined")
    fit = sps.linregress(x, y)
    t = float(sps.t.ppf(0.5 + level / 2, len(x) - 2))
    return Estimate(float(fit.slope), float(fit.slope - t * fit.stderr), float(fit.slope + t * fit.stderr), level,
                    f"least-squares slope of {len(x)} points, t interval",
                    at_level=functools.partial(linear_slope, x, y))


def loglog_slope(x: Sequence[float], y: Sequence[float], level: float = LEVEL) -> Estimate:
    """:func:`linear_slope` of ``log y`` on ``log x`` (the exponent ``b`` of ``y ~ x^b``); the
    points must be positive."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if (x <= 0).any() or (y <= 0).any():
        fail("y", "non-positive values", "positive x and y for log axes")
    return linear_slope(np.log(x), np.log(y), level)
