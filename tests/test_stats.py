"""The interval arithmetic of icl_lib.stats: differences of fractions, and the size that would
decide a claim its interval leaves undecided."""

import numpy as np
import pytest
from scipy import stats as sps

from icl_lib.claims import Above, Below, Excludes, Within
from icl_lib.stats import Estimate, fraction_diff, interval_at, proportion_ci, size_to_decide


def _exact(k, n, level=0.975):
    """scipy's Clopper-Pearson interval, the direct computation."""
    return sps.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")


def _wilson(k, n, level=0.95):
    c = sps.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return c.low, c.high


def test_fraction_diff_is_newcombes_score_interval_from_two_wilson_intervals():
    for k1, n1, k2, n2 in [(3, 8, 7, 8), (0, 4, 12, 12), (5, 9, 2, 11), (16, 16, 1, 16), (96, 128, 77, 128)]:
        e = fraction_diff(k1, n1, k2, n2)
        (l1, u1), (l2, u2) = _wilson(k1, n1), _wilson(k2, n2)
        p1, p2 = k1 / n1, k2 / n2
        lo = p1 - p2 - ((p1 - l1) ** 2 + (u2 - p2) ** 2) ** 0.5  # Newcombe (1998), method 10
        hi = p1 - p2 + ((u1 - p1) ** 2 + (p2 - l2) ** 2) ** 0.5
        assert e.value == pytest.approx(p1 - p2) and e.level == 0.95
        assert (e.lo, e.hi) == pytest.approx((lo, hi), rel=1e-9, abs=1e-9)
        r = fraction_diff(k2, n2, k1, n1)  # the groups swapped: the interval mirrored
        assert (r.value, r.lo, r.hi) == pytest.approx((-e.value, -e.hi, -e.lo), abs=1e-12)
        assert e.at(0.9).hi - e.at(0.9).lo < e.hi - e.lo and e.at(0.9) == fraction_diff(k1, n1, k2, n2, level=0.9)
    for k1 in (0, 8):  # defined at the ends
        for k2 in (0, 8):
            x = fraction_diff(k1, 8, k2, 8)
            assert -1 <= x.lo <= x.value <= x.hi <= 1
    # chapter 9's second rate against the paper's: the score interval decides what two exact ones did not
    assert fraction_diff(123, 128, 120, 128).lo > -0.15 and fraction_diff(123, 128, 120, 128).hi < 0.15
    for kw, name in [(dict(k1=9), "k1"), (dict(k2=-1), "k2"), (dict(n1=0), "n1"), (dict(n2=0), "n2"),
                     (dict(level=1.0), "level"), (dict(level=0.0), "level")]:
        with pytest.raises(ValueError, match=rf"^{name}="):
            fraction_diff(**{**dict(k1=3, n1=8, k2=7, n2=8), **kw})


@pytest.mark.parametrize("n1, n2", [(16, 16), (64, 128)])
@pytest.mark.parametrize("p1, p2", [(0.5, 0.5), (0.2, 0.6), (0.9, 0.9), (0.75, 0.95), (0.7, 0.1)])
def test_fraction_diff_covers_the_true_difference_near_the_nominal_level(n1, n2, p1, p2):
    """Exact coverage, by enumerating every outcome of two Binomial counts: a score interval covers
    close to its level (Newcombe 1998: its minimum is near 0.93 at small samples), not at least it."""
    cover = 0.0
    for a in range(n1 + 1):
        for b in range(n2 + 1):
            e = fraction_diff(a, n1, b, n2)
            if e.lo <= p1 - p2 <= e.hi:
                cover += sps.binom.pmf(a, n1, p1) * sps.binom.pmf(b, n2, p2)
    assert cover >= 0.925


def test_size_to_decide_keeps_a_fraction_and_finds_the_first_deciding_size():
    assert size_to_decide(proportion_ci(24, 24), Above(0.9).decide, 24) == 36  # 0.025 ** (1 / n) > 0.9 from 36
    assert proportion_ci(36, 36).lo > 0.9 > proportion_ci(35, 35).lo
    n = size_to_decide(proportion_ci(9, 12), Above(0.9).decide, 12)  # 3 of 12 trapped: the upper end falls
    assert 12 < n < 60 and proportion_ci(9, 12).at_size(n / 12)[1] < 0.9
    assert size_to_decide(proportion_ci(0, 3), Above(0.9).decide, 3) == 3  # already decided
    assert size_to_decide(proportion_ci(9, 10), Above(0.9).decide, 10) is None  # the fraction on the threshold
    e = fraction_diff(5, 12, 2, 12)
    n = size_to_decide(e, Above(0.0).decide, 12)
    assert n is not None and n > 12 and interval_at(e, n / 12)[0] > 0 >= interval_at(e, (n - 1) / 12)[0]
    assert size_to_decide(fraction_diff(3, 12, 3, 12), Above(0.0).decide, 12) is None


def test_size_to_decide_shrinks_other_intervals_as_one_over_root_n():
    assert size_to_decide(Estimate(0.06, 0.02, 0.10), Above(0.05).decide, 8) in (128, 129)  # 8 (0.04 / 0.01) ** 2
    assert size_to_decide(Estimate(0.05, 0.02, 0.08), Above(0.05).decide, 8) is None
    assert size_to_decide(Estimate(0.2, 0.15, 0.25), Above(0.05).decide, 8) == 8  # already decided
    # measured on more units than 100,000 (Monte Carlo tokens): the search reaches beyond them
    big = size_to_decide(Estimate(-0.005, -0.0126, 0.0023), Within(-0.01, 0.01).decide, 262_144)
    assert big is not None and 262_144 < big < 4 * 262_144
    assert interval_at(Estimate(1.0, 0.0, 4.0), 4.0) == (0.5, 2.5)  # each end's distance halves
    # a compound rule: inside the window and away from the rival; a window it overlaps decides FAIL
    rule = Within(-0.02, 0.02) & Excludes(-0.013)
    assert size_to_decide(Estimate(0.004, -0.02, 0.03), rule.decide, 12) is not None
    assert size_to_decide(Estimate(0.03, 0.0, 0.06), Below(0.02).decide, 10) > 10  # decided FAIL, once narrow
    assert size_to_decide(Estimate(0.1, float("-inf"), float("inf")), Below(0.2).decide, 4) is None


def test_order_statistic_intervals_grow_to_a_size_from_the_measured_spread():
    """A median's interval at m times its values: the measured ends at m = 1, narrower about the
    median beyond; a claim it leaves undecided gets the size that would decide it, as do the
    Bonferroni extreme and the hull of several estimates."""
    import numpy as np
    import pytest

    from icl_lib.stats import envelope, extreme, median_ci, median_of, size_to_decide

    x = np.random.default_rng(0).normal(0.05, 0.1, 39)
    e = median_ci(x)
    assert e.at_size(1) == pytest.approx((e.lo, e.hi))
    lo4, hi4 = e.at_size(4)
    assert e.lo < lo4 <= e.value <= hi4 < e.hi
    positive = (lambda lo, hi: "PASS" if lo > 0 else "FAIL" if hi < 0 else "INCONCLUSIVE")
    assert e.lo < 0 < e.value and 39 < size_to_decide(e, positive, 39) < 1000
    m = median_of([median_ci(x + d) for d in np.linspace(-0.01, 0.01, 9)])
    assert m.at_size(1) == pytest.approx((m.lo, m.hi)) and m.at_size(9)[1] - m.at_size(9)[0] < m.hi - m.lo
    ext = extreme([0.02, 0.05], [0.03, 0.02], "max")
    assert ext.at_size(1) == pytest.approx((ext.lo, ext.hi)) and ext.at_size(16)[0] > ext.lo
    hull = envelope({"a": e, "b": ext})
    assert hull.at_size(1) == pytest.approx((hull.lo, hull.hi)) and hull.at_size(4)[0] > hull.lo


def _order_rank_by_walk(n, level):
    """The rank a walk up from 0 stops at (the definition itself), every rank's cdf at once."""
    ranks = np.arange(n // 2)
    below = sps.binom.cdf(ranks, n, 0.5) <= (1 - level) / 2
    return int(n // 2 if below.all() else np.argmin(below))


@pytest.mark.parametrize("level", [0.95, 0.99, 0.999, 0.5])
def test_order_rank_is_the_rank_a_walk_from_zero_stops_at(level):
    from icl_lib.stats.intervals import order_rank
    for n in list(range(0, 3001)) + [4096, 9999, 20000, 100000]:
        assert order_rank(n, level) == _order_rank_by_walk(n, level), n
