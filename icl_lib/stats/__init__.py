"""Uncertainty of the book's measurements: every interval a claim is decided on.

Every claim a chapter checks carries an interval (:mod:`icl_lib.claims` decides its verdict on the
interval, not on the point estimate).  The arithmetic of those intervals is all here:

* :mod:`~icl_lib.stats.estimate`  -- :class:`Estimate`, a value with its interval and what it is,
  and the book's level :data:`LEVEL`;
* :mod:`~icl_lib.stats.intervals` -- intervals of one measurement: medians (order statistics, also
  censored), means (t), fractions of seeds (Clopper-Pearson, Wilson), differences of fractions,
  paired differences, running sums, fitted slopes;
* :mod:`~icl_lib.stats.combine`   -- intervals of quantities made from several measurements:
  Bonferroni-simultaneous extremes, images of intervals, paired and seed ratios, medians of
  estimates, ratios and spreads, the largest, smallest and hull of a family, geometric-mean
  ratios;
* :mod:`~icl_lib.stats.decide`    -- the interval at a larger size, and the number of seeds
  (prompts, draws) that would decide a claim left undecided.

All levels are two-sided 95 % unless stated.  scipy provides the distributions.  Every name is
importable from ``icl_lib.stats``.
"""

from .combine import (
    envelope,
    extreme,
    interval_image,
    largest,
    median_of,
    paired_ratio,
    ratio,
    ratio_ci,
    seed_median_ci,
    seed_ratio,
    smallest,
    spread,
)
from .decide import diff_seeds_to_decide, interval_at, seeds_for_interval, seeds_to_decide, size_to_decide
from .estimate import LEVEL, Estimate, affine
from .resample import bootstrap_ci
from .intervals import (
    censored_median_ci,
    fraction_diff,
    linear_slope,
    loglog_slope,
    mean_ci,
    mean_se_from_sums,
    median_ci,
    paired_diff,
    proportion_ci,
    sign_fraction,
)

__all__ = ["Estimate", "affine", "bootstrap_ci", "median_ci", "mean_ci", "proportion_ci", "sign_fraction", "paired_diff", "fraction_diff", "mean_se_from_sums",
           "interval_at", "size_to_decide", "LEVEL", "censored_median_ci", "linear_slope", "loglog_slope", "extreme",
           "interval_image", "paired_ratio", "seed_ratio", "median_of", "ratio", "spread", "seed_median_ci",
           "largest", "smallest", "envelope", "ratio_ci", "seeds_to_decide", "diff_seeds_to_decide",
           "seeds_for_interval"]
