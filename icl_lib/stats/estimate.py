"""A measured value with its interval: :class:`Estimate`, and the book's confidence level :data:`LEVEL`.

Every claim a chapter checks carries an :class:`Estimate` (:mod:`icl_lib.claims` decides its
verdict on the interval, not on the point estimate); the intervals are made by
:mod:`~icl_lib.stats.intervals`, combined by :mod:`~icl_lib.stats.combine` and grown to the size
that would decide a claim by :mod:`~icl_lib.stats.decide`.  All chapters use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Estimate", "LEVEL"]

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

    @property
    def interval(self) -> tuple[float, float]:
        return self.lo, self.hi

    def __format__(self, spec: str) -> str:
        spec = spec or ".4g"
        return f"{self.value:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"
