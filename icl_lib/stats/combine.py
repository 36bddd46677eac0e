"""Intervals of quantities made from several measurements: extremes, ratios, spreads, medians of estimates.

A claim about "every head count", "every length" or "every rho" is decided on one interval that
holds all of its parts at once:

* :func:`extreme` -- the largest, smallest or largest absolute of several measured quantities,
  with Bonferroni-simultaneous normal or t intervals (its quantile :func:`_quantile`); and
  :func:`_extreme_of_intervals`, the same from intervals already made simultaneous (chapters 5
  and 9);
* :func:`interval_image` -- the image of an interval under a function monotone between given
  points (chapter 5's distances to rival predictors);
* :func:`paired_ratio` -- ``mean(a) / mean(b) - 1`` of two predictors on the same sequences and
  its delta-method standard error; :func:`seed_ratio` -- the same for two groups of trained
  models, with the spread over seeds (chapter 5);
* :func:`median_of` -- the median over seeds of per-seed estimates, with the order-statistic
  interval of their interval ends; :func:`ratio` and :func:`spread` -- of positive estimates of
  independent seeds, Bonferroni (chapter 2);
* :func:`seed_median_ci` -- a median over seeds widened by the seeds' test-set error;
  :func:`largest`, :func:`smallest` and :func:`envelope` -- one interval for a rule that must
  hold for every member of a family (chapters 6 and 7);
* :func:`ratio_ci` -- the geometric-mean ratio over paired repetitions, t interval (chapter 8).

Each returns an :class:`~icl_lib.stats.estimate.Estimate` (or a value with its standard error).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from scipy import stats as sps

from ..validate import check_float, fail
from .estimate import LEVEL, Estimate
from .decide import interval_at
from .intervals import mean_ci, median_ci, order_interval_at, order_rank

__all__ = [
    "extreme",
    "interval_image",
    "paired_ratio",
    "seed_ratio",
    "median_of",
    "ratio",
    "spread",
    "seed_median_ci",
    "largest",
    "smallest",
    "envelope",
    "ratio_ci",
]


# ----------------------------------------------------------------------------- intervals of claims
def _quantile(level: float, m: int, df=None) -> float:
    """Two-sided quantile of each of ``m`` Bonferroni-simultaneous intervals at family ``level``
    (normal, or Student's t with ``df`` degrees of freedom)."""
    p = 1 - (1 - level) / (2 * m)
    return float(sps.norm.ppf(p)) if df is None else float(sps.t.ppf(p, df))


def extreme(values, ses, kind: str = "max", df=None, level: float = LEVEL, what: str = "") -> Estimate:
    """The largest (``kind="max"``), smallest (``"min"``) or largest absolute value (``"absmax"``)
    of ``m`` measured quantities ``values`` with standard errors ``ses``, and an interval that
    holds the true extreme whenever all ``m`` intervals ``value_k +- q se_k`` hold (each at level
    ``1 - (1 - level) / m``, Bonferroni; ``q`` normal, or t with ``df``, a number or one per
    quantity).  A rule such as ``Below(t)`` on a ``"max"`` then passes only when every quantity's
    interval lies below ``t`` and fails when one lies wholly above it.  Chapter 5."""
    v = np.asarray(values, dtype=float).reshape(-1)
    s = np.asarray(ses, dtype=float).reshape(-1)
    if v.size == 0 or v.shape != s.shape or not np.isfinite(v).all() or (s < 0).any():
        fail("values", list(v[:6]), "a non-empty sequence of finite values with as many standard errors >= 0")
    dfs = np.broadcast_to(np.asarray(np.nan if df is None else df, dtype=float), v.shape)
    q = np.array([_quantile(level, v.size, None if np.isnan(k) else k) for k in dfs])
    lo, hi = v - q * s, v + q * s
    if kind == "max":
        val, a, b = v.max(), lo.max(), hi.max()
    elif kind == "min":
        val, a, b = v.min(), lo.min(), hi.min()
    elif kind == "absmax":
        near = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)))
        val, a, b = np.abs(v).max(), near.max(), np.maximum(np.abs(lo), np.abs(hi)).max()
    else:
        fail("kind", kind, "one of 'max', 'min', 'absmax'")
    label = what or f"{kind} of {v.size}"
    # with m times as many units each standard error shrinks as 1 / sqrt(m), the values kept (a guide)
    return Estimate(float(val), float(a), float(b), level, f"{label}, Bonferroni-simultaneous intervals",
                    at_size=lambda m: extreme(v, s / math.sqrt(m), kind, df, level, what).interval,
                    at_level=lambda lv: extreme(values, ses, kind, df, lv, what))


def interval_image(
    f: Callable[[float], float], lo: float, hi: float, breaks: Sequence[float] = ()
) -> tuple[float, float]:
    """``(min, max)`` of ``f`` over ``[lo, hi]`` for ``f`` monotone between the points ``breaks``
    (e.g. ``|x - a| - |x - b|``, with breaks ``a`` and ``b``): the image of an interval."""
    xs = [lo, hi, *[b for b in breaks if lo < b < hi]]
    ys = [f(x) for x in xs]
    return min(ys), max(ys)


def paired_ratio(a, b) -> tuple[np.ndarray, np.ndarray]:
    """``mean(a) / mean(b) - 1`` over the last axis (paired values, e.g. squared errors of two
    predictors on the same sequences) and its delta-method standard error
    ``sd(a - r b) / (sqrt(n) mean(b))``, ``r = mean(a) / mean(b)``; leading axes are kept."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.shape[-1] < 2:
        fail("b", b.shape, f"paired values of a's shape {a.shape} (at least 2 on the last axis)")
    ma, mb = a.mean(-1), b.mean(-1)
    r = ma / mb
    se = (a - r[..., None] * b).std(-1, ddof=1) / (math.sqrt(a.shape[-1]) * np.abs(mb))
    return r - 1, se


def seed_ratio(a, b) -> tuple[float, float, float | None]:
    """Two groups of trained models scored on the same ``n`` sequences, ``a (Ra, n)`` and
    ``b (Rb, n)`` (squared errors): ``r - 1`` with ``r`` the ratio of the groups' mean losses, its
    standard error and degrees of freedom.  The error adds the paired test-set error of the
    seed-averaged errors (:func:`paired_ratio`) and the spread over seeds of each group's per-model
    losses, ``var_r / R`` (both relative to ``mean(b)``); ``df = min(Ra, Rb) - 1`` (``None``: a
    group of one model, whose spread over seeds is unknown -- the error is the test set's only).
    Chapter 5 (a mean loss over seeds against another)."""
    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    rel, se_pair = paired_ratio(a.mean(0), b.mean(0))
    r, mb = float(rel) + 1, float(b.mean())
    var_seed = 0.0
    if a.shape[0] > 1:
        var_seed += a.mean(-1).var(ddof=1) / a.shape[0]
    if b.shape[0] > 1:
        var_seed += r * r * b.mean(-1).var(ddof=1) / b.shape[0]
    df = min(a.shape[0], b.shape[0]) - 1
    return float(rel), math.sqrt(float(se_pair) ** 2 + var_seed / mb**2), (df if df >= 1 else None)


def _extreme_of_intervals(values, lo, hi, kind: str, what: str) -> Estimate:
    """:func:`extreme` from intervals already made simultaneous (``kind``: ``"max"`` or ``"min"``)."""
    v, a, b = (np.asarray(x, dtype=float) for x in (values, lo, hi))
    pick = np.max if kind == "max" else np.min
    return Estimate(float(pick(v)), float(pick(a)), float(pick(b)), LEVEL, f"{what}, Bonferroni-simultaneous intervals")


def median_of(estimates: Sequence[Estimate], level: float = LEVEL) -> Estimate:
    """The median over seeds of per-seed estimates (e.g. each model's paired excess risk on the
    shared test set): the median of their values, with the order-statistic interval of
    :func:`~icl_lib.stats.median_ci` taken over their interval ends, ``[k-th smallest lo, k-th
    largest hi]``: it covers the seeds' median when both the order statistics and every seed's
    own interval do (seed-to-seed and test-set error together).  ``(-inf, inf)`` with fewer than 6
    seeds at 95 %.  Chapter 2."""
    estimates = list(estimates)
    if not estimates:
        fail("estimates", estimates, "a non-empty sequence of Estimates")
    level = check_float("level", level, 0.0, 1.0, True, True)
    n = len(estimates)
    k = order_rank(n, level)
    lows = sorted(e.lo for e in estimates)
    highs = sorted(e.hi for e in estimates)
    lo, hi = (lows[k - 1], highs[n - k]) if k >= 1 else (-math.inf, math.inf)
    value = float(np.median([e.value for e in estimates]))
    return Estimate(value, float(lo), float(hi), level, f"median of {n} seeds, order-statistic interval of "
                    "the seeds' own intervals", at_size=functools.partial(order_interval_at, lows, highs, level),
                    at_level=lambda lv: median_of([e.at(_split(lv, 2)) for e in estimates], _split(lv, 2)))


def _positive(name: str, e: Estimate) -> None:
    if not e.value > 0:
        fail(name, e.value, "an Estimate of a positive quantity")


def ratio(a: Estimate, b: Estimate) -> Estimate:
    """``a / b`` for two positive quantities measured on independent seeds (e.g. two medians),
    with the interval ``[max(a.lo, 0) / b.hi, a.hi / b.lo]`` (``inf`` where ``b.lo <= 0``): it holds
    whenever both intervals do, so its level is at least ``1 - (1 - a.level) - (1 - b.level)``
    (Bonferroni).  Chapter 2."""
    _positive("a", a)
    _positive("b", b)
    lo = max(a.lo, 0.0) / b.hi if b.hi > 0 else 0.0
    hi = a.hi / b.lo if b.lo > 0 else math.inf
    level = 1 - (1 - a.level) - (1 - b.level)
    return Estimate(a.value / b.value, float(lo), float(hi), level, "ratio of independent estimates, "
                    "Bonferroni interval", at_level=lambda lv: ratio(a.at(_split(lv, 2)), b.at(_split(lv, 2))))


def spread(estimates: Sequence[Estimate]) -> Estimate:
    """``max / min - 1`` of positive quantities measured on independent seeds (e.g. the median
    loss of every head count): its interval holds whenever all of theirs do,
    ``[max(0, max lo / min hi - 1), max hi / min lo - 1]``, at level at least ``1 - sum(1 - level)``
    (Bonferroni).  Chapter 2."""
    estimates = list(estimates)
    if len(estimates) < 2:
        fail("estimates", f"{len(estimates)} Estimates", "at least 2")
    for e in estimates:
        _positive("estimates", e)
    values = [e.value for e in estimates]
    min_lo = min(e.lo for e in estimates)
    lo = max(0.0, max(e.lo for e in estimates) / min(e.hi for e in estimates) - 1)
    hi = max(e.hi for e in estimates) / min_lo - 1 if min_lo > 0 else math.inf
    level = 1 - sum(1 - e.level for e in estimates)
    m = len(estimates)
    return Estimate(max(values) / min(values) - 1, float(lo), float(hi), level,
                    f"max/min - 1 of {m} independent estimates, Bonferroni interval",
                    at_level=lambda lv: spread([e.at(_split(lv, m)) for e in estimates]))


def _split(level: float, m: int) -> float:
    """The level of each of ``m`` intervals whose joint (Bonferroni) level is ``level``."""
    return 1 - (1 - level) / m


def _z(level: float) -> float:
    return float(sps.norm.ppf(0.5 + level / 2))


# ------------------------------------------------------------------------------- intervals over seeds
def seed_median_ci(values, ses=None, level: float = LEVEL) -> Estimate:
    """Median over seeds of per-seed measurements with :func:`icl_lib.stats.median_ci`'s
    order-statistic interval; when each measurement carries a test-set standard error ``ses`` (a
    loss on finite test prompts), the interval is widened on both sides by ``z * max(ses)`` so that
    it also covers the test-set noise of the seeds at its ends (chapters 6 and 7)."""
    est = median_ci(values, level)
    if ses is None:
        return est
    ses = np.asarray(ses, dtype=float)
    if ses.shape != np.asarray(values).shape or not np.isfinite(ses).all() or (ses < 0).any():
        fail("ses", list(ses[:8]), "one finite standard error >= 0 per value")
    w = _z(level) * float(ses.max())
    return Estimate(est.value, est.lo - w, est.hi + w, level, est.what + ", widened by z x the largest test-set se",
                    at_level=lambda lv: seed_median_ci(values, ses, lv))


def largest(estimates: Mapping) -> Estimate:
    """The largest of several estimates, ``[max lo, max hi]``: a ``Below`` rule on it passes when
    every estimate's interval is below the threshold and fails when one lies wholly above ("at every
    rho", "for every H"; chapters 6 and 7).  Each bound covers the largest true value at least as often
    as one interval covers its own."""
    return _bound_of(estimates, max, "largest")


def smallest(estimates: Mapping) -> Estimate:
    """The smallest of several estimates, ``[min lo, min hi]`` (for ``Above`` rules; see :func:`largest`)."""
    return _bound_of(estimates, min, "smallest")


def _bound_of(estimates: Mapping, pick, word: str) -> Estimate:
    e = list(estimates.values())
    if not e:
        fail("estimates", estimates, "at least one Estimate")
    return Estimate(pick(x.value for x in e), pick(x.lo for x in e), pick(x.hi for x in e), e[0].level,
                    f"{word} of {len(e)}: " + ", ".join(f"{k}" for k in estimates),
                    at_level=lambda lv: _bound_of({k: x.at(lv) for k, x in estimates.items()}, pick, word))


def envelope(estimates: Mapping) -> Estimate:
    """The hull ``[min lo, max hi]`` of several estimates, valued at the one farthest from 0: a
    ``Within`` rule on it passes only when every interval lies in the window (a rule for every task
    of chapter 7; it fails only when all of them lie outside on one side, so it is conservative)."""
    e = list(estimates.values())
    if not e:
        fail("estimates", estimates, "at least one Estimate")
    far = max(e, key=lambda x: abs(x.value))
    def at_size(m):  # the hull of each estimate's interval at that size (interval_at)
        ends = [interval_at(x, m) for x in e]
        return min(lo for lo, _ in ends), max(hi for _, hi in ends)

    return Estimate(far.value, min(x.lo for x in e), max(x.hi for x in e), e[0].level,
                    f"hull of {len(e)}: " + ", ".join(f"{k}" for k in estimates), at_size=at_size,
                    at_level=lambda lv: envelope({k: x.at(lv) for k, x in estimates.items()}))


def ratio_ci(a, b, level: float = LEVEL) -> Estimate:
    """The geometric-mean ratio ``exp(mean log(a / b))`` over paired repetitions and its t interval
    (from :func:`icl_lib.stats.mean_ci` of the log ratios).  Chapter 8's paired comparisons."""
    la = np.log(np.asarray(torch.as_tensor(a, dtype=torch.float64).cpu(), dtype=float).reshape(-1))
    lb = np.log(np.asarray(torch.as_tensor(b, dtype=torch.float64).cpu(), dtype=float).reshape(-1))
    e = mean_ci(la - lb, level)
    return Estimate(math.exp(e.value), math.exp(e.lo), math.exp(e.hi), level,
                    f"geometric-mean ratio over {len(la)} paired repetitions, t interval",
                    at_level=lambda lv: ratio_ci(a, b, lv))
