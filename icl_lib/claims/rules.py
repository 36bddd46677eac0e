"""The rules a claim is decided by: a decision on the interval of its measurement.

A rule gives ``PASS`` when the whole interval satisfies it, ``FAIL`` when none of it does, and
``INCONCLUSIVE`` when the interval straddles its boundary.  Rules combine with ``&``.  Every
chapter's claims use them (:mod:`icl_lib.claims`).
"""

from __future__ import annotations

import math

__all__ = ["Rule", "Within", "Above", "Below", "Outside", "Equivalent", "Excludes", "format_value"]


def format_value(value) -> str:
    """Compact text for a measured value: 4 significant digits for floats, lists element-wise."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return format_value(value.item())
    return str(value).replace(" ", "")


class Rule:
    """A decision on an interval ``[lo, hi]``: ``PASS`` if all of it satisfies the rule, ``FAIL`` if
    none of it does, ``INCONCLUSIVE`` otherwise.  ``text`` is the rule as printed.  Rules combine
    with ``&`` (all must pass; any failure fails).  ``level``: the two-sided level of the interval
    the rule reads (``None``: the estimate's own, the book's 95 %); :meth:`verdict` reads it."""

    text = ""
    level: float | None = None

    def decide(self, lo: float, hi: float) -> str:
        raise NotImplementedError

    def verdict(self, estimate, scale: float = 1.0) -> str:
        """The verdict on ``estimate`` (an :class:`~icl_lib.stats.Estimate`) read at the rule's level;
        with ``scale`` < 1, at the level whose error rate is ``scale`` times the rule's (a wider
        interval: the multiplicity correction asks where a verdict would stop standing)."""
        return self.decide(*estimate.at(1 - scale * (1 - self.level_of(estimate))).interval)

    def level_of(self, estimate) -> float:
        """The two-sided level of the interval this rule reads from ``estimate``."""
        return self.level or estimate.level

    def alpha(self, estimate) -> float:
        """The error rate of one side of the rule's decision (2.5 % at 95 %, 5 % for an
        equivalence at 90 %)."""
        return (1 - self.level_of(estimate)) / 2

    def __and__(self, other: "Rule") -> "Rule":
        return _All(self, other)


class _All(Rule):
    def __init__(self, *rules: Rule):
        self.rules = rules
        self.text = "&".join(r.text for r in rules)

    def decide(self, lo, hi):
        return _combine([r.decide(lo, hi) for r in self.rules])

    def verdict(self, estimate, scale: float = 1.0) -> str:
        """Each part on the interval at its own level (an equivalence at 90 %, a rival at 95 %),
        every error rate scaled by ``scale``."""
        return _combine([r.verdict(estimate, scale) for r in self.rules])

    def alpha(self, estimate) -> float:
        return max(r.alpha(estimate) for r in self.rules)


def _combine(verdicts) -> str:
    if "FAIL" in verdicts:
        return "FAIL"
    return "PASS" if all(v == "PASS" for v in verdicts) else "INCONCLUSIVE"


class Within(Rule):
    """The quantity lies in ``[a, b]``."""

    def __init__(self, a: float, b: float):
        self.a, self.b = float(a), float(b)
        self.text = f"in[{format_value(self.a)},{format_value(self.b)}]"

    def decide(self, lo, hi):
        if self.a <= lo and hi <= self.b:
            return "PASS"
        return "FAIL" if hi < self.a or lo > self.b else "INCONCLUSIVE"


class Above(Rule):
    """The quantity exceeds ``t``."""

    def __init__(self, t: float):
        self.t = float(t)
        self.text = f">{format_value(self.t)}"

    def decide(self, lo, hi):
        return "PASS" if lo > self.t else ("FAIL" if hi <= self.t else "INCONCLUSIVE")


class Below(Rule):
    """The quantity is below ``t``."""

    def __init__(self, t: float):
        self.t = float(t)
        self.text = f"<{format_value(self.t)}"

    def decide(self, lo, hi):
        return "PASS" if hi < self.t else ("FAIL" if lo >= self.t else "INCONCLUSIVE")


class Outside(Rule):
    """The quantity lies outside ``[a, b]`` (e.g. a ratio that differs from 1 by more than a margin):
    ``PASS`` when the interval lies wholly outside, ``FAIL`` when it lies wholly inside."""

    def __init__(self, a: float, b: float):
        self.a, self.b = float(a), float(b)
        self.text = f"outside[{format_value(self.a)},{format_value(self.b)}]"

    def decide(self, lo, hi):
        if hi < self.a or lo > self.b:
            return "PASS"
        return "FAIL" if self.a <= lo and hi <= self.b else "INCONCLUSIVE"


class Equivalent(Rule):
    """The quantity lies in ``[a, b]``, shown by two one-sided tests (TOST): ``PASS`` when its 90 %
    interval (level ``1 - 2 alpha``, alpha = 5 %) lies in ``[a, b]``, ``FAIL`` when it lies wholly
    outside, ``INCONCLUSIVE`` otherwise.  For "the same as", "close to", "insensitive to": an
    equivalence margin ``[a, b]`` set by the nearest rival (``a`` may be ``-inf`` for a spread or a
    distance, which cannot be negative)."""

    level = 0.90

    def __init__(self, a: float, b: float):
        self.a, self.b = float(a), float(b)
        self.text = f"equiv[{format_value(self.a)},{format_value(self.b)}]"

    def decide(self, lo, hi):
        if self.a <= lo and hi <= self.b:
            return "PASS"
        return "FAIL" if hi < self.a or lo > self.b else "INCONCLUSIVE"


class Excludes(Rule):
    """The data tell the quantity apart from a rival hypothesis's value ``v``: ``PASS`` when the
    interval excludes ``v``, ``INCONCLUSIVE`` when it contains it (the data cannot decide; they
    never refute the paper's claim on their own)."""

    def __init__(self, v: float, name: str = ""):
        self.v = float(v)
        label = name.replace(' ', '-')
        self.text = f"excludes({label + '=' if label else ''}{format_value(self.v)})"

    def decide(self, lo, hi):
        return "INCONCLUSIVE" if lo <= self.v <= hi else "PASS"
