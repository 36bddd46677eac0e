"""Uncertainty of the book's measurements: intervals for medians, means, fractions and paired losses.

Every claim a chapter checks carries an interval (:mod:`icl_lib.claims` decides its verdict on the
interval, not on the point estimate):

* :func:`median_ci`     -- a distribution-free interval for the median over seeds, from order
  statistics (exact coverage for continuous data, valid for any sample size);
* :func:`mean_ci`       -- Student's t interval for a mean (e.g. over independent test sets);
* :func:`proportion_ci` -- Clopper-Pearson (exact) or Wilson interval for a fraction of seeds;
* :func:`paired_diff`   -- the mean of paired differences on one shared test set and its standard
  error (two models, or a model and an estimator, scored on the same sequences);
* :func:`fraction_diff` -- the difference of two fractions of independent seeds (two exact
  intervals, union bound);
* :class:`Estimate`     -- a value with its interval and what it is;
* :func:`size_to_decide` -- for a claim its interval leaves undecided, how many seeds (test prompts,
  Monte Carlo draws) would decide it at the measured value and spread.

All levels are two-sided 95 % unless stated.  scipy provides the distributions.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy import stats as sps

from .validate import check_float, check_int, fail

__all__ = ["Estimate", "median_ci", "mean_ci", "proportion_ci", "paired_diff", "fraction_diff", "mean_se_from_sums",
           "interval_at", "size_to_decide", "LEVEL"]

LEVEL = 0.95  # the book's confidence level


@dataclass(frozen=True)
class Estimate:
    """A measured value with its interval ``[lo, hi]`` at ``level``; ``what`` says how it was made
    (e.g. ``"median of 6 seeds, order-statistic interval"``)."""

    value: float
    lo: float
    hi: float
    level: float = LEVEL
    what: str = ""
    # ``at_size(m)``: the interval ``(lo, hi)`` the same value would have with ``m`` times as many
    # independent units (seeds, prompts, draws); ``None``: it shrinks as ``1 / sqrt(m)`` about the
    # value (:func:`interval_at`).  Exact for fractions of seeds (:func:`proportion_ci`).
    at_size: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    @property
    def interval(self) -> tuple[float, float]:
        return self.lo, self.hi

    def __format__(self, spec: str) -> str:
        spec = spec or ".4g"
        return f"{self.value:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"


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
    k = 0  # the largest k with P(B <= k - 1) <= (1 - level) / 2, B ~ Bin(n, 1/2)
    while k + 1 <= n // 2 and sps.binom.cdf(k, n, 0.5) <= (1 - level) / 2:
        k += 1
    lo, hi = (a[k - 1], a[n - k]) if k >= 1 else (-math.inf, math.inf)
    return Estimate(float(np.median(a)), float(lo), float(hi), level, f"median of {n}, order-statistic interval")


def mean_ci(x: Sequence[float], level: float = LEVEL) -> Estimate:
    """The sample mean and Student's t interval (n >= 2)."""
    a = _finite("x", x)
    check_int("len(x)", len(a), 2)
    se = float(a.std(ddof=1) / math.sqrt(len(a)))
    t = float(sps.t.ppf(0.5 + level / 2, len(a) - 1))
    m = float(a.mean())
    return Estimate(m, m - t * se, m + t * se, level, f"mean of {len(a)}, t interval")


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
    return Estimate(k / n, float(ci.low), float(ci.high), level, f"{k} of {n}, {method} binomial interval", grow)


def _diff_at(k1: int, n1: int, k2: int, n2: int, each: float, m: float) -> tuple[float, float]:
    (lo1, hi1), (lo2, hi2) = _cp(k1 * m, n1 * m, each), _cp(k2 * m, n2 * m, each)
    return lo1 - hi2, hi1 - lo2


def fraction_diff(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> Estimate:
    """The difference ``k1/n1 - k2/n2`` of two fractions of independent seeds, with the interval
    from the two exact (Clopper-Pearson) intervals at level ``(1 + level) / 2`` each:
    ``[lo1 - hi2, hi1 - lo2]``.  By the union bound it covers the true difference with probability
    at least ``level`` for every pair of true fractions and sizes (conservative; score intervals
    such as Newcombe's are shorter but cover less than ``level`` at some fractions with a few
    seeds, e.g. 92.3 % at 8 and 8 seeds and fractions 1/2).  Chapter 9."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    k1, k2 = check_int("k1", k1, 0, n1), check_int("k2", k2, 0, n2)
    each = (1 + check_float("level", level, 0.0, 1.0, True, True)) / 2
    lo, hi = _diff_at(k1, n1, k2, n2, each, 1.0)
    return Estimate(k1 / n1 - k2 / n2, lo, hi, level,
                    f"{k1}/{n1} - {k2}/{n2}, two exact intervals at {each:.3f} (union bound)",
                    functools.partial(_diff_at, k1, n1, k2, n2, each))


def interval_at(e: Estimate, m: float) -> tuple[float, float]:
    """The interval ``e`` would have, its value kept, with ``m`` times as many independent units:
    ``e.at_size(m)`` where the estimate knows it (exact for fractions of seeds), otherwise each end's
    distance from the value shrunk by ``sqrt(m)`` (t and normal intervals, order statistics of a
    median, slopes: a guide, not a guarantee).  An unbounded end stays unbounded."""
    if e.at_size is not None:
        return e.at_size(m)
    s = math.sqrt(m)
    return e.value - (e.value - e.lo) / s, e.value + (e.hi - e.value) / s


def size_to_decide(e: Estimate, decide: Callable[[float, float], str], n: int, most: int = 100_000) -> int | None:
    """The smallest number of units ``N >= n`` (``n``: the units ``e`` was measured on, e.g. seeds per
    group) at which :func:`interval_at` would make ``decide(lo, hi)`` (a rule's
    :meth:`~icl_lib.claims.Rule.decide`) something other than ``"INCONCLUSIVE"``: what would decide a
    claim this measurement leaves undecided, at the measured value and spread.  ``None`` when no
    ``N`` up to ``most`` does (the value lies on the rule's boundary, or the interval is unbounded)."""
    n = check_int("n", n, 1)
    if not (math.isfinite(e.value) and math.isfinite(e.lo) and math.isfinite(e.hi)):
        return None
    def decided(N: int) -> bool:
        return decide(*interval_at(e, N / n)) != "INCONCLUSIVE"

    below, N = n - 1, n  # geometric steps to a deciding size, then bisection for the first one
    while not decided(N):
        if N >= most:
            return None
        below, N = N, min(most, max(N + 1, int(N * 1.05)))
    while N - below > 1:
        mid = (below + N) // 2
        below, N = (below, mid) if decided(mid) else (mid, N)
    return N


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
    return Estimate(m, m - z * se, m + z * se, level, f"paired mean over {len(d)}, normal interval")


def mean_se_from_sums(s1, s2, n: int):
    """``(mean, standard error of the mean)`` of ``n`` values from their running sum ``s1`` and sum of
    squares ``s2`` (numbers, numpy arrays or torch tensors, element-wise): the sample variance
    ``(s2 - n mean^2) / (n - 1)``, clipped at 0 against round-off, over ``n``.  For Monte Carlo
    estimates accumulated chunk by chunk (chapters 3 and 7)."""
    n = check_int("n", n, 2)
    mean = s1 / n
    var = (s2 - n * mean**2) / (n - 1)
    return mean, ((abs(var) + var) / 2) ** 0.5 / math.sqrt(n)
