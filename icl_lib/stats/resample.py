"""Intervals by resampling the independent units: the bootstrap over initialisations (chapter 9).

Where an estimand pools several measurements of each independent unit -- the outcomes of one
initialisation trained on several data streams -- the units, not the measurements, are resampled:
:func:`bootstrap_ci` draws whole units with replacement (scipy's ``stats.bootstrap``, paired over
the arrays it is given) and reads the percentile interval of the statistic.  The bootstrap
distribution is kept, so the interval at any other level needs no new resampling.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy import stats as sps

from ..validate import check_float, check_int, fail
from .estimate import LEVEL, Estimate

__all__ = ["bootstrap_ci"]


def _percentile(value: float, dist: np.ndarray, level: float, what: str) -> Estimate:
    a = (1 - level) / 2
    lo, hi = np.quantile(dist, [a, 1 - a])
    return Estimate(value, float(lo), float(hi), level, what,
                    at_level=lambda lv: _percentile(value, dist, check_float("level", lv, 0.0, 1.0, True, True),
                                                    what))


def bootstrap_ci(data: Sequence, statistic: Callable[..., float], what: str, n_resamples: int = 9999,
                 seed: int = 0, level: float = LEVEL) -> Estimate:
    """``statistic(*data)`` with the percentile bootstrap interval over the units: ``data`` is one
    array or several, each with one row per independent unit (an initialisation: its outcomes on
    every data stream), resampled together (paired).  ``what`` names the statistic and the units.
    ``n_resamples`` resamples from the generator seeded by ``seed``."""
    arrays = [np.asarray(a) for a in data]
    n = len(arrays[0]) if arrays else 0
    if n < 2 or any(len(a) != n for a in arrays):
        fail("data", [len(a) for a in arrays], "arrays with the same number (at least 2) of units in their first axis")
    n_resamples = check_int("n_resamples", n_resamples, 100, 10_000_000)
    value = float(statistic(*arrays))
    def on_units(idx):  # the units are resampled by their indices, whatever the arrays' shapes
        return statistic(*(a[idx.astype(int)] for a in arrays))

    res = sps.bootstrap((np.arange(n),), on_units, n_resamples=n_resamples, vectorized=False,
                        method="percentile", random_state=np.random.default_rng(seed), confidence_level=level)
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    return _percentile(value, dist, level, f"{what}, percentile bootstrap over {n} units")
