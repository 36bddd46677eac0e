"""Uncertainty of the book's measurements: intervals for medians, means, fractions and paired losses.

Every claim a chapter checks carries an interval (:mod:`icl_lib.claims` decides its verdict on the
interval, not on the point estimate):

* :func:`median_ci`     -- a distribution-free interval for the median over seeds, from order
  statistics (exact coverage for continuous data, valid for any sample size);
* :func:`mean_ci`       -- Student's t interval for a mean (e.g. over independent test sets);
* :func:`proportion_ci` -- Clopper-Pearson (exact) or Wilson interval for a fraction of seeds;
* :func:`paired_diff`   -- the mean of paired differences on one shared test set and its standard
  error (two models, or a model and an estimator, scored on the same sequences);
* :class:`Estimate`     -- a value with its interval and what it is.

All levels are two-sided 95 % unless stated.  scipy provides the distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

from .validate import check_float, check_int, fail

__all__ = ["Estimate", "median_ci", "mean_ci", "proportion_ci", "paired_diff", "mean_se_from_sums", "LEVEL"]

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


def proportion_ci(k: int, n: int, level: float = LEVEL, method: str = "exact") -> Estimate:
    """The fraction ``k / n`` and its Clopper-Pearson (``"exact"``) or Wilson interval."""
    n = check_int("n", n, 1)
    k = check_int("k", k, 0, n)
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=level, method=method)
    return Estimate(k / n, float(ci.low), float(ci.high), level, f"{k} of {n}, {method} binomial interval")


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
