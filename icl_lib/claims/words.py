"""One table from the papers' words to the book's rules (the claims page shows it).

A claim of a paper is decided by the rule its words call for: "consistently" is a fraction of seeds
of at least 0.9, not a majority; "the same as" is an equivalence within a margin, decided by two
one-sided tests, not a point null.  Each entry of :data:`WORDS` lists the words it ``covers``;
each declared claim of a paper names the entry its rule follows
(:attr:`~icl_lib.claims.spec.ClaimSpec.word`), and its quote contains one of that entry's words
(:func:`names_words`), or the claim says beside its quote why it departs from the table
(:attr:`~icl_lib.claims.spec.ClaimSpec.departs`).  An entry that reads an equivalence or an
identity asks for the nearest rival (``rival``): the claim names it, the chapter computes its
value, and a PASS needs the interval to exclude it.  A test holds every declaration to the table,
and each entry's text to its code (``tests/test_claimsets.py``).

The thresholds of "consistently" and of a one-run observation are definitions with declared
alternatives (:mod:`icl_lib.definitions`): every record carries the verdict under each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..definitions import DEFINITIONS
from .rules import Above, Rule, _All

__all__ = ["Word", "WORDS", "MARGIN_RULE", "follows", "names_words", "reads_equivalence"]

# How wide an equivalence margin may be: at most half the distance from the claimed value to the
# nearest rival's, so that the margin never reaches half-way to the rival (checked on the records).
MARGIN_RULE = "the margin's half-width is at most half the distance from the claimed value to the nearest rival's"


@dataclass(frozen=True)
class Word:
    """An entry of the table: the papers' words it ``covers`` (a paper claim's quote contains one),
    the ``rule`` in words, the rule classes that implement it (``"words"``: a condition decided
    exactly, e.g. every member counted), for a fraction of seeds the smallest threshold the rule
    may use (``threshold``; ``definition``: the definition of :mod:`icl_lib.definitions` that sets
    it), and whether the reading names its nearest rival (``rival``)."""

    covers: tuple[str, ...]
    rule: str
    classes: tuple[str, ...]
    threshold: float | None = None
    definition: str = ""
    rival: bool = False

    @property
    def words(self) -> str:
        """The words covered, as the dashboard's table prints them."""
        return ", ".join(self.covers)


_EQUIV = "two one-sided tests: the 90 % interval inside the margin"

WORDS: dict[str, Word] = {
    "consistently": Word(("consistently", "consistent", "despite random initializations"),
                         f"a fraction of seeds of at least {DEFINITIONS['consistently'].value}: its exact interval "
                         f"above {DEFINITIONS['consistently'].value}",
                         ("Above",), DEFINITIONS["consistently"].value, "consistently"),
    "training does": Word(("the training dynamic", "the training enters", "training process", "during the training",
                           "the training dynamics", "during training", "along training"),
                          f"a description of what training does, read over seeds as 'consistently': a fraction "
                          f"of runs of at least {DEFINITIONS['consistently'].value}, its exact interval above "
                          f"{DEFINITIONS['consistently'].value} (for the order of two events in a run, the share "
                          "of untied runs in that order)", ("Above",), DEFINITIONS["consistently"].value,
                          "consistently"),
    "every": Word(("every", "for all", "throughout", "always", "each", "all", "any", "still hold", "persists",
                   "continues", "keeps"),
                  "every seed, run or member: counted exactly, or the interval of the worst member above or below "
                  "its threshold, or within its window", ("words", "Above", "Below", "Within")),
    "regardless of": Word(("regardless of", "for any", "across", "whatever"),
                          "the claim's own rule holds in every group of the factor (the worst group decides): counted, above "
                          "or below a threshold, within a window, or two one-sided tests",
                          ("words", "Above", "Below", "Within", "Equivalent")),
    "typically": Word(("typically", "mostly", "in most cases", "often"),
                      "a majority of seeds: the fraction's exact interval above 0.5", ("Above",), 0.5),
    "we observe": Word(("we observe", "in our experiment", "figure", "as shown", "examination of", "we found",
                        "exhibit"),
                       f"a paper's observation of one run, read over seeds as what training typically gives: the "
                       f"fraction of seeds that show it, its exact interval above {DEFINITIONS['one-run'].value}",
                       ("Above",), DEFINITIONS["one-run"].value, "one-run"),
    "can": Word(("can", "may", "appear", "emerge", "will appear", "occur"),
                "existence: the share of seeds that show it, its exact interval above a rare exception (0.05)",
                ("Above",), 0.05),
    "close to": Word(("close to", "closely", "near", "nearly", "approximately", "approximate", "tracks", "track",
                      "performs like", "roughly", "aligns"),
                     f"equivalence within a margin ({_EQUIV}), the nearest rival outside the margin or excluded by "
                     "the interval", ("Equivalent",), rival=True),
    "the same as": Word(("the same", "equal", "identical", "consistent across", "homogeneous", "equivalent"),
                        f"equivalence within a margin ({_EQUIV}), the nearest rival excluded by the interval",
                        ("Equivalent",), rival=True),
    "insensitive to": Word(("insensitive", "not sensitive", "does not depend", "does not degrade", "robust"),
                           f"the difference or spread within a margin ({_EQUIV}), or a slope above or below a bound, "
                           "the nearest rival (a dependence of the size a reader would otherwise expect) excluded by "
                           "the interval",
                           ("Equivalent", "Above", "Below"), rival=True),
    "nearly optimal": Word(("nearly optimal", "near-optimal", "optimal"),
                           f"equivalence to the optimum within a margin ({_EQUIV}), the next-best predictor (the "
                           "nearest rival) excluded by the interval", ("Equivalent",), rival=True),
    "equals": Word(("equals", "equal to", "coincides", "holds", "implements", "is the", "are the", "lies within",
                    "fall into", "converges to", "approaches", "corresponds to", "tends to"),
                   f"an identity: the measured ratio or difference in a tight window around the identity's value (1 "
                   f"or 0; {_EQUIV}), not a window on a slope, the nearest rival excluded by the interval",
                   ("Equivalent", "Within"), rival=True),
    "depends on": Word(("depends on", "depend on", "changes with", "differs", "varies", "degrades", "depends"),
                       "the difference (or ratio) outside a margin: its interval wholly outside, or above or below it",
                       ("Outside", "Above", "Below")),
    "increases steadily": Word(("increases steadily", "keeps increasing", "grow", "increase"),
                               "growth: a rising trend over the second half of training, the slope of the log of "
                               "the quantity on the log of the step, its interval above 0",
                               ("Above",), 0.0),
    "stabilises": Word(("stabilize", "stabilise", "converge", "stalls", "settles"),
                       "a trend, then no decline (or rise) beyond noise: the last value within the run's own noise "
                       "of its extreme, counted over runs, or its interval above or below a threshold", ("words", "Above", "Below")),
    "significantly": Word(("significantly", "significant", "sharply"),
                          "an order by a margin: the interval of the ratio (or difference) beyond a stated margin, a "
                          "factor 2 where the paper gives none", ("Above", "Below")),
    "larger than": Word(("larger", "smaller", "outperforms", "beats", "better", "before", "after", "decreases",
                         "increases", "falls", "vanishing", "closer", "higher", "lower", "early", "quickly", "until",
                         "particularly well",
                         "concentrates", "rely on", "limiting", "continues to", "first", "sharply"),
                        "an order: the interval of the difference or ratio on one side (of 0, of 1, or of a stated "
                        "margin); the order of two events in a run, a fraction above 0.5 (a sign test)",
                        ("Above", "Below")),
    "of order": Word(("of order", "scales as", "at rate", "rate", "as fast as", "order", "o(", "exponentially",
                      "geometric"),
                     "the fitted exponent or rate in a window around the paper's (or two one-sided tests), or above or "
                     "below a bound the paper states, the neighbouring exponent excluded", ("Within", "Equivalent", "Above", "Below")),
    "is": Word(("has the form", "the form", "form", "structure", "pattern", "positive definite", "precisely",
                "exactly", "share the same sign", "sum to zero", "diagonal", "can be written as", "learns to",
                "act as", "two stages", "undergoes"),
               "the form holds: every member counted, or the measured gap within a tight window (or two one-sided "
               "tests), above or below a threshold, or at round-off",
               ("words", "Within", "Below", "Above", "Equivalent")),
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


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[’‘]", "'", text).lower().split())


def names_words(quote: str, word: str) -> str | None:
    """The first of the entry ``word``'s words that ``quote`` contains (case and spacing aside, a
    word matched whole), or ``None``."""
    plain = _plain(quote)
    for w in WORDS[word].covers:
        pat = re.escape(_plain(w))
        if re.search(rf"(?<![a-z]){pat}" + (r"(?![a-z])" if w[-1].isalpha() else ""), plain):
            return w
    return None


def reads_equivalence(word: str) -> bool:
    """Whether the entry ``word`` reads an equivalence or an identity (it asks for the nearest rival)."""
    return bool(word) and WORDS[word].rival
