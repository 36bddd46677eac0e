"""What would decide a claim that an interval leaves undecided: its interval at a larger size.

* :func:`interval_at`     -- the interval an :class:`~icl_lib.stats.estimate.Estimate` would have
  with ``m`` times as many independent units (exact for fractions of seeds, ``1 / sqrt(m)``
  otherwise);
* :func:`size_to_decide`  -- for a claim its interval leaves undecided, how many seeds (test
  prompts, Monte Carlo draws) would decide it at the measured value and spread (every chapter's
  ``CLAIM`` lines, :mod:`icl_lib.claims`);
* :func:`seeds_to_decide`, :func:`diff_seeds_to_decide` -- the seeds at which a fraction, or a
  difference of two fractions (:func:`~icl_lib.stats.intervals.fraction_diff`), kept as measured
  would have an exact interval on one side of a threshold; :func:`seeds_for_interval` -- the same
  for a mean-like estimate whose interval shrinks as ``1 / sqrt(n)`` (chapter 9).
"""

from __future__ import annotations

import math
from typing import Callable

from ..validate import check_int
from .estimate import LEVEL, Estimate
from .intervals import _cp, _newcombe

__all__ = ["interval_at", "size_to_decide", "seeds_to_decide", "diff_seeds_to_decide", "seeds_for_interval"]


def interval_at(e: Estimate, m: float) -> tuple[float, float]:
    """The interval ``e`` would have, its value kept, with ``m`` times as many independent units:
    ``e.at_size(m)`` where the estimate knows it (exact for fractions of seeds), otherwise each end's
    distance from the value shrunk by ``sqrt(m)`` (t and normal intervals, order statistics of a
    median, slopes: a guide, not a guarantee).  An unbounded end stays unbounded."""
    if e.at_size is not None:
        return e.at_size(m)
    s = math.sqrt(m)
    return e.value - (e.value - e.lo) / s, e.value + (e.hi - e.value) / s


def size_to_decide(e: Estimate, decide: Callable[[float, float], str], n: int, most: int | None = None) -> int | None:
    """The smallest number of units ``N >= n`` (``n``: the units ``e`` was measured on, e.g. seeds per
    group) at which :func:`interval_at` would make ``decide(lo, hi)`` (a rule's
    :meth:`~icl_lib.claims.Rule.decide`) something other than ``"INCONCLUSIVE"``: what would decide a
    claim this measurement leaves undecided, at the measured value and spread.  ``None`` when no
    ``N`` up to ``most`` (default: 10,000 times ``n``, at least 100,000) does (the value lies on the
    rule's boundary, or the interval is unbounded)."""
    n = check_int("n", n, 1)
    most = max(100_000, 10_000 * n) if most is None else check_int("most", most, 1)
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


def seeds_to_decide(k: int, n: int, threshold: float, level: float = LEVEL, most: int = 100_000) -> int | None:
    """The smallest number of seeds ``N >= n`` at which the fraction ``k / n``, kept as it is, would
    have an exact interval on one side of ``threshold``: what would decide a claim ``fraction >=
    threshold`` that this build leaves INCONCLUSIVE; ``None`` when the fraction equals it or no
    ``N`` up to ``most`` does."""
    p = check_int("k", k, 0, check_int("n", n, 1)) / n
    if abs(p - threshold) < 1e-12:
        return None
    N = n
    while N <= most:
        lo, hi = _cp(p * N, N, level)
        if lo > threshold or hi < threshold:
            return N
        N = max(N + 1, int(N * 1.02))
    return None


def diff_seeds_to_decide(k1: int, n1: int, k2: int, n2: int, threshold: float = 0.0, level: float = LEVEL,
                         most: int = 100_000) -> int | None:
    """The number of seeds of the first group at which :func:`~icl_lib.stats.intervals.fraction_diff`'s
    (Newcombe) interval of the difference ``k1/n1 - k2/n2`` (fractions kept, both groups grown in
    proportion) would lie on one side of ``threshold``; ``None`` when the difference equals it or
    nothing up to ``most`` does."""
    p1, p2 = k1 / n1, k2 / n2
    if abs(p1 - p2 - threshold) < 1e-12:
        return None
    m = 1.0
    while n1 * m <= most:
        lo, hi = _newcombe(p1 * n1 * m, n1 * m, p2 * n2 * m, n2 * m, level)
        if lo > threshold or hi < threshold:
            return int(math.ceil(n1 * m))
        m *= 1.02
    return None


def seeds_for_interval(e: Estimate, threshold: float, n: int) -> int | None:
    """For a mean-like estimate over ``n`` seeds whose interval straddles ``threshold``: the seeds
    at which an interval of the same centre, shrinking as ``1 / sqrt(n)``, would exclude it (a
    rough guide for t intervals and slopes; ``None`` when the value sits on the threshold)."""
    gap = abs(e.value - threshold)
    half = (e.hi - e.lo) / 2
    if not math.isfinite(half) or gap < 1e-12:
        return None
    return max(n, int(math.ceil(n * (half / gap) ** 2)))
