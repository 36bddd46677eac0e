"""One table from the papers' words to the book's rules (the claims page shows it).

A claim of a paper is decided by the rule its words call for: "consistently" is a fraction of seeds
of at least 0.9, not a majority; "the same as" is an equivalence within a margin, decided by two
one-sided tests, not a point null.  Each declared claim of a paper names the entry of
:data:`WORDS` its rule follows (:attr:`~icl_lib.claims.spec.ClaimSpec.word`), or says beside its
quote why it departs from it (:attr:`~icl_lib.claims.spec.ClaimSpec.departs`); a test holds every
declaration to the table (``tests/test_claimsets.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .rules import Above, Rule, _All

__all__ = ["Word", "WORDS", "follows"]


@dataclass(frozen=True)
class Word:
    """An entry of the table: the papers' ``words``, the ``rule`` in words, the rule classes that
    implement it (``"words"``: a condition decided exactly, e.g. every member counted), and for a
    fraction of seeds the smallest threshold the rule may use."""

    words: str
    rule: str
    classes: tuple[str, ...]
    threshold: float | None = None


WORDS: dict[str, Word] = {
    "consistently": Word("consistently, despite random initializations, highly consistent",
                         "a fraction of seeds of at least 0.9: its exact interval above 0.9",
                         ("Above",), 0.9),
    "every": Word("every, for all, throughout, always, each",
                  "every seed, run or member: counted exactly, or the interval of the worst member on the "
                  "right side of the threshold", ("words", "Above", "Below", "Within")),
    "regardless of": Word("regardless of, for any, across",
                          "the claim's own rule holds in every group of the factor (the worst group decides)",
                          ("words", "Above", "Below", "Within", "Equivalent")),
    "typically": Word("typically, mostly, in most cases",
                      "a majority of seeds: the fraction's interval above 0.5", ("Above",), 0.5),
    "can": Word("can, may, appear, emerge",
                "existence: the share of seeds that show it has an interval above a rare exception (0.05)",
                ("Above",), 0.0),
    "close to": Word("close to, near, approximately, tracks, performs like",
                     "equivalence within a margin (two one-sided tests: the 90 % interval inside it), the nearest "
                     "rival outside the margin or excluded by the interval", ("Equivalent",)),
    "the same as": Word("the same as, equal, identical, nearly identical, consistent across",
                        "equivalence within a margin (two one-sided tests: the 90 % interval inside it)",
                        ("Equivalent",)),
    "insensitive to": Word("insensitive to, does not depend on, robust to",
                           "the difference or spread within a margin (two one-sided tests)", ("Equivalent",)),
    "depends on": Word("depends on, changes with, differs",
                       "the difference (or ratio) outside a margin: its interval wholly outside",
                       ("Outside", "Above", "Below")),
    "stabilises": Word("increases steadily, first increase and then decrease to stabilize, converges, stalls",
                       "a trend, then no decline (rise) beyond noise: the last value within the run's own noise "
                       "of its extreme", ("words", "Above", "Below")),
    "larger than": Word("larger, smaller, outperforms, beats, better, before, decreases, increases",
                        "an order: the interval of the difference or ratio on one side (of 0, of 1, or of a stated "
                        "margin); the order of two events in a run, a fraction above 0.5 (a sign test)",
                        ("Above", "Below")),
    "of order": Word("of order, scales as, at rate",
                     "the fitted exponent or rate in a window around the paper's, the neighbouring exponent "
                     "excluded", ("Within", "Equivalent", "Above", "Below")),
    "is": Word("is, has the form, implements, precisely, exactly, positive definite",
               "the form or identity holds: every member counted, or the measured gap within a tight window or "
               "at round-off", ("words", "Within", "Below", "Above", "Equivalent")),
}


def _classes(rule: Rule | str) -> set[str]:
    """The rule classes of a rule (its parts, a rival excluded aside)."""
    if isinstance(rule, str):
        return {"words"}
    if isinstance(rule, _All):
        return {c for r in rule.rules for c in _classes(r)} - {"Excludes"}
    return {type(rule).__name__}


def follows(rule: Rule | str, word: str) -> bool:
    """Whether ``rule`` is one the table's entry ``word`` calls for (its class, and for a fraction
    of seeds a threshold at least the entry's)."""
    entry = WORDS[word]
    classes = _classes(rule)
    if not classes or not classes <= set(entry.classes):
        return False
    if entry.threshold is not None:
        parts = rule.rules if isinstance(rule, _All) else (rule,)
        return all(getattr(r, "t", entry.threshold) >= entry.threshold for r in parts if isinstance(r, Above))
    return True
