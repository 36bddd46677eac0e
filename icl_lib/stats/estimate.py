"""A measured value with its interval: :class:`Estimate`, and the book's confidence level :data:`LEVEL`.

Every claim a chapter checks carries an :class:`Estimate` (:mod:`icl_lib.claims` decides its
verdict on the interval, not on the point estimate); the intervals are made by
:mod:`~icl_lib.stats.intervals`, combined by :mod:`~icl_lib.stats.combine` and grown to the size
that would decide a claim by :mod:`~icl_lib.stats.decide`.  All chapters use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Estimate", "LEVEL", "affine"]

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
    # value (:func:`~icl_lib.stats.decide.interval_at`).  Exact for fractions of seeds
    # (:func:`~icl_lib.stats.intervals.proportion_ci`).
    at_size: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False, repr=False)
    # ``at_level(level)``: the same measurement's Estimate at another confidence level (the maker's
    # own interval recomputed); ``None``: :meth:`at` rescales the interval as a normal one.
    at_level: Callable[[float], "Estimate"] | None = field(default=None, compare=False, repr=False)

    @property
    def interval(self) -> tuple[float, float]:
        return self.lo, self.hi

    @property
    def exact_levels(self) -> bool:
        """Whether :meth:`at` recomputes the interval (rather than rescaling it as a normal one)."""
        return self.at_level is not None

    def at(self, level: float) -> "Estimate":
        """This measurement's estimate at confidence ``level``: the interval maker's own interval
        at that level where it is known (:attr:`at_level`), else each side's distance from the value
        scaled by the ratio of normal quantiles (a guide for intervals that are not normal).  A
        claim decided by an equivalence rule reads it at 90 % (two one-sided tests), and the
        dashboard's multiplicity correction reads the level at which a verdict would change."""
        if abs(level - self.level) < 1e-12:
            return self
        if self.at_level is not None:
            return self.at_level(level)
        from scipy.stats import norm

        f = float(norm.ppf(0.5 + level / 2) / norm.ppf(0.5 + self.level / 2))
        lo = self.value - (self.value - self.lo) * f if math.isfinite(self.lo) else self.lo
        hi = self.value + (self.hi - self.value) * f if math.isfinite(self.hi) else self.hi
        what = self.what if self.what.endswith("(rescaled)") else f"{self.what} (rescaled)"
        return Estimate(self.value, lo, hi, level, what)

    def __format__(self, spec: str) -> str:
        spec = spec or ".4g"
        return f"{self.value:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"


def affine(e: Estimate, a: float, b: float = 0.0, what: str = "") -> Estimate:
    """The estimate of ``a x + b`` from the estimate ``e`` of ``x`` (its interval mapped, the ends
    swapped for ``a < 0``, readable at other levels as ``e`` is): a measurement in the unit a
    claim is declared in (a share of the training steps, a ratio to a closed form)."""
    lo, hi = sorted((a * e.lo + b, a * e.hi + b))
    at_size = None
    if e.at_size is not None:
        def at_size(m, f=e.at_size):
            return tuple(sorted((a * x + b for x in f(m))))
    at_level = None if e.at_level is None else (lambda lv: affine(e.at_level(lv), a, b, what))
    return Estimate(a * e.value + b, lo, hi, e.level, what or e.what, at_size, at_level)
