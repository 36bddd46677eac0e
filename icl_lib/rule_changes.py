"""Every change to a claim's rule after the claim was first written, with why: the book's
rule-change page (``book/rule_changes.md``) is generated from :data:`CHANGES`.

A rule says what the paper's words say and is written before its run (:mod:`icl_lib.claims`).
When a rule is changed later -- a threshold, a window, a rival added, the profiles it is declared
for, the statistic it is applied to, or the claim replaced -- the change is listed here: the claim,
its chapter, the rule before and after, why, the date, and whether a run of the claim had been
seen when it was made.  A rule relaxed after a run is restored to its first form (the restoration
is itself listed); a rule made stricter after a run, to say what the paper's words say, is listed
with the run it followed.  The list is kept in ``rule_changes.json`` beside this module (one object
per change, the fields of :class:`RuleChange`); a change is added there, never edited away.  The dashboard marks every claim that has an entry here
(``icl_lib/book/sphinx``), and a test holds each entry to a claim the chapters declare or to a
claim it says was removed (``tests/test_rule_changes.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .validate import fail

__all__ = ["RuleChange", "CHANGES", "CHANGE_VERDICTS", "changes_of", "direction", "net_effect"]

CHANGE_VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN", "-")  # "-": no such claim on that side
_RANK = {"FAIL": 0, "INCONCLUSIVE": 1, "NOT-RUN": 1, "-": 1, "PASS": 2}


def direction(before: str, after: str) -> str:
    """``"toward PASS"``, ``"toward FAIL"`` or ``""`` for a verdict moving from ``before`` to
    ``after`` (a claim removed or added counts as undecided on its missing side)."""
    d = _RANK[after] - _RANK[before]
    return "toward PASS" if d > 0 else "toward FAIL" if d < 0 else ""


def net_effect(changes) -> dict[str, int]:
    """How many recorded verdicts ``changes`` moved toward PASS and toward FAIL."""
    out = {"toward PASS": 0, "toward FAIL": 0}
    for c in changes:
        for _, before, after in c.verdicts:
            d = direction(before, after)
            if d:
                out[d] += 1
    return out


@dataclass(frozen=True)
class RuleChange:
    """One change of the rule of the claims ``claims`` of chapter ``chapter`` (its notebook's name,
    ``NN_topic``) on ``date`` (``YYYY-MM-DD``): ``before`` and ``after`` as the dashboard
    prints rules (``after`` is ``"removed"`` for a claim no longer declared), ``why`` in words, and
    ``after_run``: whether a run deciding the claim had been seen when the change was made;
    ``verdicts``: per claim (or ``"old id -> new id"`` for a claim replaced), its verdict in the
    published book (the paper profile's records) before and after the change, ``(label, before,
    after)``, where they were recorded with it (``"-"``: no such claim on that side);
    ``corrected``: a later correction of the entry's own description, dated (the entry keeps its
    text)."""

    chapter: str
    claims: tuple[str, ...]
    date: str
    before: str
    after: str
    why: str
    after_run: bool = True
    verdicts: tuple[tuple[str, str, str], ...] = ()
    corrected: str = ""

    @property
    def net(self) -> dict[str, int]:
        """The verdicts this change moved toward PASS and toward FAIL."""
        return net_effect([self])

    def __post_init__(self):
        if not re.fullmatch(r"\d{2}_[a-z0-9_]+", self.chapter):
            fail("chapter", self.chapter, "a chapter notebook's name, NN_topic")
        if not self.claims or any(not c or " " in c for c in self.claims):
            fail("claims", self.claims, "a non-empty tuple of claim ids")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.date):
            fail("date", self.date, "a date YYYY-MM-DD")
        for name in ("before", "after", "why"):
            if not getattr(self, name).strip():
                fail(name, getattr(self, name), "a non-empty text")
        for row in self.verdicts:
            if len(row) != 3 or any(v not in CHANGE_VERDICTS for v in row[1:]):
                fail("verdicts", row, f"(claim, before, after) with verdicts among {CHANGE_VERDICTS}")


def _load() -> tuple[RuleChange, ...]:
    """The changes listed in ``rule_changes.json`` beside this module, oldest first."""
    raw = json.loads(Path(__file__).with_name("rule_changes.json").read_text())
    return tuple(sorted((RuleChange(r["chapter"], tuple(r["claims"]), r["date"], r["before"], r["after"], r["why"],
                                    bool(r["after_run"]),
                                    tuple((k, *v) for k, v in r.get("verdicts", {}).items()),
                                    r.get("corrected", ""))
                         for r in raw), key=lambda c: c.date))


CHANGES: tuple[RuleChange, ...] = _load()


def changes_of(chapter: str, cid: str) -> list[RuleChange]:
    """The changes listed for claim ``cid`` of ``chapter``, oldest first."""
    return sorted((c for c in CHANGES if c.chapter == chapter and cid in c.claims), key=lambda c: c.date)
