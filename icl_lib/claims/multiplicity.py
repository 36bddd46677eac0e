"""How much chance could do to a book of verdicts: each decision's error rate, and Holm's correction.

Every claim decided on an interval errs with a known rate: a 95 % interval decides a one-sided
question with an error rate of at most 2.5 % (an equivalence at 90 %, 5 %).  Over the 150-odd
decided claims of the book a few verdicts could be chance.  This module measures, for each decided
claim, how far below its own rate its decision stands:

* :func:`decision_share` -- the smallest share ``s`` of the rule's error rate at which the
  verdict still stands (its interval read at the level with ``s`` times the error rate); a
  decision with ``s = 0.01`` would stand at a hundredth of its rate.  ``p = s * alpha`` is then the
  decision's one-sided p-value;
* :func:`holm` -- Holm's step-down correction over a family of decisions, each at its own rate:
  which verdicts would stand if the family's chance of any wrong decision were held at one claim's
  rate;
* :func:`expected_errors` -- the number of wrong verdicts chance alone could give if every
  decided claim's true value sat on its rule's boundary (the sum of their rates).

The chapters record ``s`` with each claim (:class:`~icl_lib.claims.report.Claims`); the claims
dashboard applies :func:`holm` over every recorded claim of the papers.
"""

from __future__ import annotations

from typing import Mapping, Sequence

__all__ = ["decision_share", "holm", "expected_errors"]


def decision_share(rule, estimate, verdict: str, tol: float = 1e-4) -> float | None:
    """For a claim ``rule`` decided as ``verdict`` (``PASS`` or ``FAIL``) on ``estimate``: the
    smallest share ``s`` in ``(0, 1]`` of the rule's error rate at which the verdict still stands,
    by bisection on ``s`` (the interval widens as ``s`` falls).  ``None`` for an undecided claim;
    0 when it stands at every level tried (down to ``1e-12``)."""
    if verdict not in ("PASS", "FAIL"):
        return None
    if rule.verdict(estimate, 1e-12) == verdict:
        return 0.0
    lo, hi = 1e-12, 1.0  # the verdict fails at lo and stands at hi
    while hi / lo > 1 + tol:
        mid = (lo * hi) ** 0.5
        if rule.verdict(estimate, mid) == verdict:
            hi = mid
        else:
            lo = mid
    return hi


def holm(shares: Mapping[str, float]) -> dict[str, bool]:
    """Holm's step-down procedure over decided claims ``{id: share}`` (:func:`decision_share`),
    each at its own rate: ranked by share, the ``j``-th smallest (from 1) stands while every share
    up to it is at most ``1 / (m - j + 1)`` (``m`` claims); the first that is not, and every one
    after it, would be undecided.  Returns ``{id: stands}``."""
    order = sorted(shares, key=lambda k: shares[k])
    m, out, standing = len(order), {}, True
    for j, key in enumerate(order, start=1):
        standing = standing and shares[key] <= 1 / (m - j + 1)
        out[key] = standing
    return out


def expected_errors(alphas: Sequence[float]) -> float:
    """The expected number of wrong verdicts among decisions at error rates ``alphas`` if every
    claim's true value sat on its rule's boundary (the most chance can do)."""
    return float(sum(alphas))
