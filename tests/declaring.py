"""Claims for the tests: each claim is declared (a ClaimSpec) the moment a test decides it, then
decided by the same Claims.decide / decide_exact a chapter calls, so the tests exercise the real
path from declaration to verdict without a chapter's claimset."""

from __future__ import annotations

from icl_lib.claims import Claims
from icl_lib.claims.spec import PROFILES, ChapterClaims, ClaimSpec


class Declaring:
    """A :class:`~icl_lib.claims.Claims` of chapter ``chapter`` whose claims the test declares as
    it decides them (``check``: an exact condition; ``test``: a rule read on an interval;
    ``not_run``: declared for another profile).  Every other attribute is the Claims'."""

    def __init__(self, chapter: str, profile: str, device: str = "cpu", changed=()):
        self.claims = Claims(ChapterClaims(chapter), profile, device, changed)

    def __getattr__(self, name):
        return getattr(self.claims, name)

    def _declare(self, cid, rule, statement, section="P1 §3", *, kind="paper", known_failure="", profiles=PROFILES,
                 undecided="", unit="seeds", finding="p1-form") -> None:
        spec = ClaimSpec(id=cid, quote=statement, section=section, kind=kind, finding=finding, rule=rule,
                         estimand="the measured value", departs="a claim of the tests" if kind == "paper" else "",
                         known_failure=known_failure, profiles=profiles, undecided=undecided, unit=unit)
        self.claims.declared = ChapterClaims(self.claims.chapter, self.claims.declared.specs + (spec,))

    def check(self, cid, passed, measured, expected, statement="s", *, kind="paper", known_failure=""):
        self._declare(cid, expected, statement, kind=kind, known_failure=known_failure)
        return self.claims.decide_exact(cid, passed, measured)

    def test(self, cid, estimate, rule, statement, section="P1 §3", *, n=None, unit="seeds", undecided="", kind="paper",
             profiles=PROFILES, known_failure=""):
        self._declare(cid, rule, statement, section, kind=kind, known_failure=known_failure, profiles=profiles,
                      undecided=undecided, unit=unit)
        self.claims.decide(cid, estimate, n=n)

    def not_run(self, cid, expected, statement, profiles=None):
        other = profiles or tuple(p for p in PROFILES if p != self.claims.profile)
        self._declare(cid, expected, statement, profiles=other)
        return self.claims.decide_exact(cid, False, "-")
