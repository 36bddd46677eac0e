"""A chapter's claims as it decides them: :class:`Claims` collects them and prints the ``CLAIM``
lines, the table and the JSON record every chapter ends with (see :mod:`icl_lib.claims`)."""

from __future__ import annotations

import json
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from ..definitions import active
from ..version import __version__
from .decision import (
    _known_in, _source, _population, _rivals, _rival, _reading_alternatives,
    _margin, _whole, _design, _defs, _lean, _decide_text,
    _known,
)
from .multiplicity import decision_share
from .rules import Excludes, format_value
from .spec import KINDS, PROFILES

__all__ = ["Claims", "Claim", "VERDICTS", "PROFILES", "KINDS", "CLAIM_LINE", "CLAIMS_MIME", "CLAIMS_GLUE_KEY"]

# The machine-readable claims that Claims.report() records: a glue record (the format of
# myst_nb.glue(..., display=False) and scrapbook), so that notebook front-ends and the book show
# nothing of it and MyST-NB keeps it with the chapter's glue data.
CLAIMS_MIME = "application/vnd.icl-lib.claims+json"
CLAIMS_GLUE_KEY = "icl_claims"
_GLUE_PREFIX = "application/papermill.record/"
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN")
_PREFIX = {"paper": "CLAIM", "beyond": "CLAIM", "check": "CHECK"}
# One printed claim, as Claim.line() writes it; the book's extension and its browser test read it
# (groups: id, verdict, measured, interval, expected, profiles).
CLAIM_LINE = re.compile(
    r"^(?:CLAIM|CHECK) (\S+) (PASS|FAIL|INCONCLUSIVE|NOT-RUN) measured=(\S*) interval=(\S*) expected=(\S*) "
    r"profiles=(\S*)\s*$",
    re.M,
)


@dataclass
class Claim:
    """One decided claim, as the chapter records it and the dashboard and the records read it."""

    cid: str  # short identifier, unique in the chapter
    verdict: str  # one of VERDICTS
    measured: str
    expected: str  # the rule or condition checked, in words or symbols
    statement: str  # the paper's words (a paper claim), the book's hypothesis, or what a check checks
    profile: str  # the profile of this build
    interval: str = "-"  # "[lo,hi]" of the measured value at the rule's level ("-": decided exactly)
    section: str = ""  # the paper's section, e.g. "P1 §3"
    profiles: tuple = PROFILES  # the profiles in which the claim is declared to hold
    level: float | None = None  # the level of the interval the rule read
    cell: int | None = None  # IPython execution count of the cell that checked it (None outside IPython)
    known_failure: str = ""  # a non-reproduction the chapter reports with its evidence ("" if none)
    kind: str = "paper"  # one of KINDS
    decide: str = ""  # INCONCLUSIVE: what would decide it, which way it leans, why not trained ("" otherwise)
    finding: str = ""  # the finding it belongs to (icl_lib.claims.findings)
    rule_source: str = ""  # the words-to-rules entry its rule follows, or why it departs from it
    estimand: str = ""  # what is measured
    population: str = ""  # whom it is measured on, with how many the population leaves out
    rival: str = ""  # the nearest rival and its value
    share: float | None = None  # decided on an interval: the share of its error rate at which it stands
    alpha: float | None = None  # the error rate of its decision (one side)
    lean: str = ""  # INCONCLUSIVE: the verdict its point estimate alone would give
    alternatives: dict = field(default_factory=dict)  # definition=alternative -> the verdict under it
    margin: str = ""  # an equivalence: whether its margin follows the margin rule, given its rival
    whole: str = ""  # a claim decided on a subpopulation: the whole population's figure
    design: str = ""  # the smallest effect its n can decide (a fraction: the best its n can show)
    definitions: dict = field(default_factory=dict)  # the measurement definitions set away from their own

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    @property
    def fragile(self) -> bool:
        """Whether a declared alternative of a definition gives another verdict."""
        return any(v != self.verdict for v in self.alternatives.values() if v not in ("-", "NOT-RUN"))

    def line(self) -> str:
        return (f"{_PREFIX[self.kind]} {self.cid} {self.verdict} measured={self.measured} interval={self.interval} "
                f"expected={self.expected} profiles={','.join(self.profiles)}")


def _profiles(profiles) -> tuple:
    if isinstance(profiles, str):
        profiles = (profiles,)
    profiles = tuple(profiles)
    if not profiles or any(p not in PROFILES for p in profiles):
        raise ValueError(f"profiles={profiles!r} is invalid: accepted a non-empty subset of {PROFILES}")
    return profiles


class Claims:
    """Collects a chapter's claims and reports them (all chapters).

    ``changed``: the chapter's parameters set away from its own values
    (:func:`icl_lib.parameters.changed_parameters`); with none, the chapter runs in the profiles its
    claims are declared for, and :meth:`report` fails on a FAIL the chapter does not report (as
    CI and nbval run it); with some, a reader's re-run, :meth:`report` prints every verdict and
    finishes, and the summary says that the claims were declared for other parameters.
    ``declared``: the chapter's claims to decide (a :class:`~icl_lib.claims.spec.ChapterClaims`,
    which names the chapter); ``profile`` and ``device``: where the chapter runs, resolved already
    (``"quick"`` or ``"paper"``, ``"cpu"`` or ``"cuda"``).  A chapter's setup builds it
    (:meth:`~icl_lib.setups.base.ChapterSetup.claims`), handing down what it resolved."""

    def __init__(self, declared, profile: str, device: str, changed=()):
        self.declared = declared
        self.chapter, self.profile, self.device = declared.chapter, profile, device
        self.changed = tuple(changed)
        self.items: list[Claim] = []

    def _add(self, claim: Claim) -> None:
        if any(c.cid == claim.cid for c in self.items):
            raise ValueError(f"cid={claim.cid!r} is invalid: accepted an id not used before in this chapter")
        if " " in claim.cid or not claim.cid:
            raise ValueError(f"cid={claim.cid!r} is invalid: accepted a non-empty id without spaces")
        self.items.append(claim)

    def runs(self, key: str) -> bool:
        """Whether the declared claim ``key`` is decided in this build's profile."""
        return self.profile in self.declared.get(key).profiles

    # ----------------------------------------------------------------- deciding declared claims
    def decide(self, key: str, estimate, /, *, n: int | None = None, among: tuple | None = None,
               left_out: str = "", rival: float | dict | None = None, whole=None, **fields) -> None:
        """Decide the declared claim ``key`` (:mod:`icl_lib.claimsets`; its id's fields in
        ``fields``, e.g. ``H=2``) on ``estimate`` (an :class:`~icl_lib.stats.Estimate`) by its
        declared rule, read at the rule's level (an equivalence at 90 %).  ``rival``: the value of
        the declared nearest rival (``{name: value}`` for several), which the interval must then
        exclude.  ``n``: the independent
        units the estimate rests on (for the size that would decide it, and for a fraction the best
        its n can show).  ``among``: ``(kept, of)`` or ``(kept, of, why)``, the units of the declared
        population the estimate reads and those it was drawn from (``why``: what the left-out
        units lack, in words): ``n`` is then ``kept`` unless given, and the record says
        ``"left out: <of - kept> of <of>, <why>"`` beside the population's words.
        ``left_out``: who the population leaves out, in words, where ``among`` cannot say it;
        ``whole``: for a claim on a subpopulation, the same measurement over
        the whole population (an :class:`~icl_lib.stats.Estimate`, a number or a text).  The
        verdict is also decided under each alternative of the reading definitions its entry uses
        (:mod:`icl_lib.definitions`).  A claim not declared for this profile is recorded as
        ``NOT-RUN``.  The verdict is the last of :attr:`items` (a notebook cell shows nothing)."""
        spec = self.declared.get(key)
        cid, quote = spec.fill(**fields)
        n, left_out = _among(among, n, left_out)
        if isinstance(spec.rule, str):
            raise ValueError(f"claim={key!r} is invalid for decide(): its rule is {spec.rule!r} in words "
                             "(decide_exact)")
        rule = spec.rule
        rivals = _rivals(spec, key, rival)
        for name, value in rivals.items():
            rule = rule & Excludes(value, name)
        if self.profile not in spec.profiles:
            self._not_run(spec, cid, quote, rule.text)
            return
        verdict = rule.verdict(estimate)
        at = estimate.at(1 - 2 * rule.alpha(estimate))  # the interval as the rule reads it (90 %: an equivalence)
        lean = _lean(rule, estimate) if verdict == "INCONCLUSIVE" else ""
        decide = _decide_text(at, rule, n, spec.unit, spec.undecided, lean) if verdict == "INCONCLUSIVE" else ""
        self._add(Claim(cid, verdict, format_value(estimate.value), rule.text, quote, self.profile,
                        f"[{format_value(at.lo)},{format_value(at.hi)}]", spec.section, spec.profiles, at.level,
                        _cell_number(), _known(_known_in(spec, cid, fields, self.profile)) if verdict != "PASS" else "",
                        spec.kind, decide, spec.finding, _source(spec), spec.estimand,
                        _population(spec, left_out), _rival(spec, rival),
                        decision_share(rule, estimate, verdict), rule.alpha(estimate), lean,
                        _reading_alternatives(spec, rule, estimate), _margin(spec, rivals),
                        _whole(whole), _design(spec.rule, estimate, n, spec.unit), _defs()))

    def decide_exact(self, key: str, passed: bool, measured, /, *, among: tuple | None = None,
                     left_out: str = "", whole=None, **fields) -> None:
        """Decide the declared claim ``key``, whose rule is a condition in words (``"every
        model"``), by the chapter's own comparison ``passed`` (no interval: an exact statement, or
        every member of a family).  ``among``, ``left_out`` and ``whole``: as in :meth:`decide`; the
        verdict is the last of :attr:`items`."""
        spec = self.declared.get(key)
        cid, quote = spec.fill(**fields)
        _, left_out = _among(among, None, left_out)
        expected = spec.rule if isinstance(spec.rule, str) else spec.rule.text
        if self.profile not in spec.profiles:
            self._not_run(spec, cid, quote, expected)
            return
        verdict = "PASS" if passed else "FAIL"
        self._add(Claim(cid, verdict, format_value(measured), expected.replace(" ", ""), quote, self.profile, "-",
                        spec.section, spec.profiles, None, _cell_number(),
                        _known(_known_in(spec, cid, fields, self.profile)) if verdict != "PASS" else "", spec.kind, "",
                        spec.finding, _source(spec), spec.estimand, _population(spec, left_out), _rival(spec, None),
                        whole=_whole(whole), definitions=_defs()))

    def cannot_decide(self, key: str, why: str, /, **fields) -> None:
        """Record the declared claim ``key`` as ``INCONCLUSIVE`` where this build has nothing to
        decide it on (``why``: e.g. no seed reached the pattern)."""
        spec = self.declared.get(key)
        cid, quote = spec.fill(**fields)
        expected = spec.rule if isinstance(spec.rule, str) else spec.rule.text
        if self.profile not in spec.profiles:
            self._not_run(spec, cid, quote, expected)
            return
        self._add(Claim(cid, "INCONCLUSIVE", "-", expected.replace(" ", ""), quote, self.profile, "-", spec.section,
                        spec.profiles, None, _cell_number(), "", spec.kind, " ".join(why.split()), spec.finding,
                        _source(spec), spec.estimand, _population(spec, ""), _rival(spec, None),
                        definitions=_defs()))

    def _not_run(self, spec, cid: str, quote: str, expected: str) -> None:
        self._add(Claim(cid, "NOT-RUN", "-", expected.replace(" ", ""), quote, self.profile, "-", spec.section,
                        spec.profiles, None, _cell_number(), kind=spec.kind, finding=spec.finding,
                        rule_source=_source(spec), estimand=spec.estimand, population=spec.population,
                        rival=spec.rival))

    # ----------------------------------------------------------------- the chapter's report
    def summary_markdown(self) -> str:
        """This build's verdicts in words, as Markdown: the counts by kind, then one item per claim
        that did not pass (its measurement and rule, the chapter's report of a non-reproduction, or
        what would decide an undecided claim and which way it leans).  For a chapter's closing
        section; a re-run with the chapter's parameters changed says so first."""
        lines = []
        if self.changed:
            lines.append(f"**These verdicts come from a re-run with parameters set away from the chapter's own "
                         f"({', '.join(self.changed)}); its claims are declared for the chapter's profiles, so a "
                         "FAIL here says what these settings give, not what the profiles decide.**\n")
        for kind, label in (("paper", "claims of the papers"), ("beyond", "claims beyond the papers"),
                            ("check", "checks of the book's own derivations and design")):
            n = self.counts(kind)
            if sum(n.values()):
                lines.append(f"{sum(n.values())} {label}: {n['PASS']} pass, {n['FAIL']} fail, "
                             f"{n['INCONCLUSIVE']} inconclusive, {n['NOT-RUN']} not run in this profile.")
        text = "  ".join(lines) + "\n"
        for c in self.items:
            if c.verdict == "PASS":
                continue
            item = f"\n- `{c.cid}` **{c.verdict}**"
            if c.verdict == "NOT-RUN":
                item += f" (declared for {', '.join(c.profiles)})"
            else:
                item += f": measured {c.measured}, interval {c.interval}, condition `{c.expected}`"
            if c.population and c.population != "every seed":
                item += f" ({c.population})"
            if c.known_failure:
                item += f"; reported not to reproduce: {c.known_failure}"
            if c.decide:
                item += f"; undecided: {c.decide}"
            text += item + "."
        fragile = [c for c in self.items if c.fragile]
        if fragile:
            text += ("\n\nVerdicts that another of the book's declared definitions would change "
                     "(`icl_lib.definitions`):")
            for c in fragile:
                text += f"\n- `{c.cid}` **{c.verdict}**, " + "; ".join(
                    f"{k}: {v}" for k, v in c.alternatives.items() if v != c.verdict) + "."
        return text

    def reported(self) -> list[Claim]:
        """The claims whose non-reproduction the chapter reports (``known_failure``), any verdict."""
        return [c for c in self.items if c.known_failure]

    def counts(self, kind: str | None = "paper") -> dict[str, int]:
        """How many claims of each verdict, of ``kind`` (``None``: every kind)."""
        return {v: sum(c.verdict == v and kind in (None, c.kind) for c in self.items) for v in VERDICTS}

    def payload(self) -> dict:
        """The claims and where they ran, as JSON-ready data (the :data:`CLAIMS_MIME` output)."""
        return {
            "chapter": self.chapter,
            "profile": self.profile,
            "device": _device_name(self.device),
            "icl_lib": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "changed": list(self.changed),
            "definitions": {k: v for k, v in active().items()},
            "claims": [asdict(c) for c in self.items],
        }

    def table(self):
        """The chapter's claims, narrow enough for the page: the claim, its verdict, the measurement
        with its interval and the rule (the dashboard shows the statements, populations, rivals and
        sources beside them)."""
        import pandas as pd

        return pd.DataFrame([{"claim": c.cid, "verdict": c.verdict,
                              "measured [interval]": c.measured + ("" if c.interval == "-" else f" {c.interval}"),
                              "rule": c.expected} for c in self.items])

    def report(self) -> None:
        """Print the ``CLAIM`` lines, display the table, record the claims, and -- in the chapter's
        own settings (no ``changed`` parameter) -- fail if a claim failed that the chapter does not
        report (``INCONCLUSIVE`` and ``NOT-RUN`` never fail the chapter).  A claim declared for
        the chapter but not decided fails it too: every declaration is a claim.  Under an
        alternative of a definition (``ICL_DEFINITIONS``, :mod:`icl_lib.definitions`) the
        verdicts are printed and recorded and none fails the run: the record compares them."""
        if not self.items:
            raise AssertionError(f"chapter {self.chapter} checked no claim")
        if self.changed:
            print(f"RE-RUN {self.chapter} with parameters set away from the chapter's own "
                  f"({', '.join(self.changed)}): every verdict is printed, none fails the run")
        for c in self.items:
            print(c.line())
        for c in self.reported():
            print(f"REPORTED {c.cid} {c.verdict} in this run; reported not to reproduce: {c.known_failure}")
        for c in self.items:
            if c.decide:
                print(f"UNDECIDED {c.cid}: {c.decide}")
            if c.design and "cannot" in c.design:
                print(f"DESIGN {c.cid}: {c.design}")
            if c.fragile:
                print(f"FRAGILE {c.cid} {c.verdict}: " + "; ".join(
                    f"{k} gives {v}" for k, v in c.alternatives.items() if v != c.verdict))
        payload = self.payload()
        try:
            from IPython import get_ipython
            from IPython.display import display

            import pandas as pd

            with pd.option_context("display.max_colwidth", 60):
                display(self.table())
            if get_ipython() is not None:  # the same claims as JSON, for the book's dashboard
                record = {"scrapbook": {"name": CLAIMS_GLUE_KEY, "mime_prefix": _GLUE_PREFIX}}
                display({_GLUE_PREFIX + CLAIMS_MIME: payload}, metadata=record, raw=True)
        except ImportError:  # pragma: no cover - outside IPython the lines suffice
            pass
        out = os.environ.get("ICL_CLAIMS_DIR")
        if out and not self.changed:  # <dir>/<profile>/<chapter>.json: the dashboard shows it beside the other profile
            folder = Path(out, self.profile)
            folder.mkdir(parents=True, exist_ok=True)
            record = dict(payload, recorded=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
            tmp = folder / f".{self.chapter}.json.tmp"
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, folder / f"{self.chapter}.json")
        if self.changed or active():
            return
        failed = [c.cid for c in self.items if c.verdict == "FAIL" and not c.known_failure]
        if failed:
            raise AssertionError(f"{len(failed)} claim(s) failed in {self.chapter}: {', '.join(failed)}")
        decided = {c.cid for c in self.items}
        missing = [s.id for s in self.declared if not s.fields and s.id not in decided]
        missing += [s.id for s in self.declared if s.fields and not any(s is self.declared.find(c) for c in decided)]
        if missing:
            raise AssertionError(f"{len(missing)} declared claim(s) not decided in {self.chapter}: {', '.join(missing)}")


def _cell_number() -> int | None:
    """The execution count of the notebook cell running now (the book links each claim to it)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    shell = get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    # the running cell's source is already the last input (index = its execution count) in every
    # IPython version, while ``shell.execution_count`` is bumped before or after the run depending on it
    return len(history) - 1 if history else None


def _among(among, n, left_out: str) -> tuple:
    """``(n, left_out)`` of a decision from ``among = (kept, of)`` or ``(kept, of, why)``: ``n`` is
    ``kept`` unless given, ``left_out`` says how many of ``of`` the population left out and, where
    ``why`` is given, why (``"13 of 52, not in the pattern"``); nothing when it kept them all."""
    if among is None:
        return n, left_out
    if len(among) not in (2, 3) or (len(among) == 3 and not isinstance(among[2], str)):
        raise ValueError(f"among={among!r} is invalid: accepted (kept, of) or (kept, of, why in words)")
    kept, total = (int(v) for v in among[:2])
    why = among[2].strip() if len(among) == 3 else ""
    if not 0 <= kept <= total:
        raise ValueError(f"among={among!r} is invalid: accepted (kept, of) with 0 <= kept <= of")
    if left_out:
        raise ValueError(f"left_out={left_out!r} is invalid with among: accepted '' (among writes it)")
    count = f"{total - kept} of {total}" + (f", {why}" if why else "")
    return (kept if n is None else n), (count if total > kept else "")


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)``, for the resolved ``device`` the chapter ran on."""
    if device == "cuda" and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return str(device)
