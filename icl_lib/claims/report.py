"""A chapter's claims as it decides them: :class:`Claims` collects them and prints the ``CLAIM``
lines, the table and the JSON record every chapter ends with (see :mod:`icl_lib.claims`)."""

from __future__ import annotations

import json
import math
import os
import platform
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from ..config import DEVICES, resolve_device
from ..validate import check_choice
from ..version import __version__
from .rules import Rule, format_value

__all__ = ["Claims", "Claim", "VERDICTS", "PROFILES", "KINDS", "CLAIM_LINE", "CLAIMS_MIME", "CLAIMS_GLUE_KEY"]

# The machine-readable claims that Claims.report() records: a glue record (the format of
# myst_nb.glue(..., display=False) and scrapbook), so that notebook front-ends and the book show
# nothing of it and MyST-NB keeps it with the chapter's glue data.
CLAIMS_MIME = "application/vnd.icl-lib.claims+json"
CLAIMS_GLUE_KEY = "icl_claims"
_GLUE_PREFIX = "application/papermill.record/"
VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN")
PROFILES = ("quick", "paper")  # the profiles a claim can be declared for
# what a claim is about: a paper's statement, the book's own finding beyond the papers, or a check
# of the book's derivations, samplers, invariances and design
KINDS = ("paper", "beyond", "check")
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
    cid: str  # short identifier, unique in the chapter
    verdict: str  # one of VERDICTS
    measured: str
    expected: str  # the rule or condition checked, in words or symbols
    statement: str  # the paper's claim being checked, quoted
    profile: str  # the profile of this build
    interval: str = "-"  # "[lo,hi]" of the measured value ("-": a check without one)
    section: str = ""  # the paper's section, e.g. "P1 §3"
    profiles: tuple = PROFILES  # the profiles in which the claim is declared to hold
    level: float | None = None  # the interval's confidence level
    cell: int | None = None  # IPython execution count of the cell that checked it (None outside IPython)
    known_failure: str = ""  # a non-reproduction the chapter reports with its evidence ("" if none)
    kind: str = "paper"  # one of KINDS
    decide: str = ""  # INCONCLUSIVE: what would decide it, and why that is not trained ("" otherwise)

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

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
    """Collects a chapter's claims and reports them (all chapters)."""

    def __init__(self, chapter: str, profile: str, device: str = "auto"):
        check_choice("device", device, DEVICES)
        check_choice("profile", profile, PROFILES)
        self.chapter, self.profile, self.device = chapter, profile, device
        self.items: list[Claim] = []

    def _add(self, claim: Claim) -> None:
        if any(c.cid == claim.cid for c in self.items):
            raise ValueError(f"cid={claim.cid!r} is invalid: accepted an id not used before in this chapter")
        if " " in claim.cid or not claim.cid:
            raise ValueError(f"cid={claim.cid!r} is invalid: accepted a non-empty id without spaces")
        self.items.append(claim)

    def runs(self, profiles) -> bool:
        """Whether a claim declared for ``profiles`` is evaluated in this build's profile."""
        return self.profile in _profiles(profiles)

    def test(self, cid: str, estimate, rule: Rule, statement: str, section: str = "", profiles=PROFILES,
             known_failure: str = "", kind: str = "paper", n: int | None = None, unit: str = "seeds",
             undecided: str = "") -> None:
        """Record claim ``cid``: ``rule`` decides on the interval of ``estimate`` (an
        :class:`icl_lib.stats.Estimate`).  A claim not declared for this profile is recorded as
        ``NOT-RUN`` whatever the estimate.  ``known_failure``: the chapter's report of where this
        claim, as written before the run, did not reproduce (see the module's docstring).
        ``kind``: one of :data:`KINDS`.  ``n``: the independent units (``unit``) the estimate rests
        on; where the verdict is INCONCLUSIVE, the claim records how many would decide it
        (:func:`~icl_lib.stats.size_to_decide`) and ``undecided``, the chapter's reason for not
        training them.  Returns nothing (a check as the last line of a cell adds no output); the
        verdict is ``claims.items[-1].verdict``."""
        profiles, kind = _profiles(profiles), check_choice("kind", kind, KINDS)
        if self.profile not in profiles:
            return self.not_run(cid, rule.text, statement, section, profiles, kind=kind)
        verdict = rule.decide(estimate.lo, estimate.hi)
        interval = f"[{format_value(estimate.lo)},{format_value(estimate.hi)}]"
        decide = _decide_text(estimate, rule, n, unit, undecided) if verdict == "INCONCLUSIVE" else ""
        self._add(Claim(cid, verdict, format_value(estimate.value), rule.text, statement, self.profile, interval,
                        section, profiles, estimate.level, _cell_number(), _known(known_failure), kind, decide))

    def not_run(self, cid: str, expected: str, statement: str, section: str = "", profiles=("paper",),
                kind: str = "paper") -> None:
        """List claim ``cid``, declared for ``profiles`` only, as not run in this profile."""
        self._add(Claim(cid, "NOT-RUN", "-", expected.replace(" ", ""), statement, self.profile, "-", section,
                        _profiles(profiles), None, _cell_number(), kind=check_choice("kind", kind, KINDS)))

    def check(self, cid: str, passed: bool, measured, expected: str, statement: str = "", section: str = "",
              profiles=PROFILES, known_failure: str = "", kind: str = "paper") -> None:
        """Record claim ``cid`` decided by the chapter's own comparison ``passed`` (no interval: for
        exact statements, e.g. a closed form at round-off).  ``known_failure`` and ``kind`` as for
        :meth:`test`.  Returns nothing."""
        profiles, kind = _profiles(profiles), check_choice("kind", kind, KINDS)
        if self.profile not in profiles:
            return self.not_run(cid, expected, statement, section, profiles, kind=kind)
        verdict = "PASS" if passed else "FAIL"
        self._add(Claim(cid, verdict, format_value(measured), expected.replace(" ", ""), statement, self.profile,
                        "-", section, profiles, None, _cell_number(), _known(known_failure), kind))

    def summary_markdown(self) -> str:
        """This build's verdicts in words, as Markdown: the counts by kind, then one item per claim
        that did not pass (its measurement and rule, the chapter's report of a non-reproduction, or
        what would decide an undecided claim).  For a chapter's closing section."""
        lines = []
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
            if c.known_failure:
                item += f"; reported not to reproduce: {c.known_failure}"
            if c.decide:
                item += f"; undecided: {c.decide}"
            text += item + "."
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
            "claims": [asdict(c) for c in self.items],
        }

    def table(self):
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "claim": c.cid,
                    "verdict": c.verdict,
                    "measured": c.measured,
                    "interval": c.interval,
                    "expected": c.expected,
                    "profiles": ",".join(c.profiles),
                    "reported": c.known_failure,
                    "kind": c.kind,
                    "section": c.section,
                    "statement": c.statement,
                }
                for c in self.items
            ]
        )

    def report(self) -> None:
        """Print the ``CLAIM`` lines, display the table, and fail if any claim failed
        (``INCONCLUSIVE`` and ``NOT-RUN`` do not fail the chapter)."""
        if not self.items:
            raise AssertionError(f"chapter {self.chapter} checked no claim")
        for c in self.items:
            print(c.line())
        for c in self.reported():
            print(f"REPORTED {c.cid} {c.verdict} in this run; reported not to reproduce: {c.known_failure}")
        for c in self.items:
            if c.decide:
                print(f"UNDECIDED {c.cid}: {c.decide}")
        payload = self.payload()
        try:
            from IPython import get_ipython
            from IPython.display import display

            import pandas as pd

            with pd.option_context("display.max_colwidth", None):  # the statements in full
                display(self.table())
            if get_ipython() is not None:  # the same claims as JSON, for the book's dashboard
                record = {"scrapbook": {"name": CLAIMS_GLUE_KEY, "mime_prefix": _GLUE_PREFIX}}
                display({_GLUE_PREFIX + CLAIMS_MIME: payload}, metadata=record, raw=True)
        except ImportError:  # pragma: no cover - outside IPython the lines suffice
            pass
        out = os.environ.get("ICL_CLAIMS_DIR")
        if out:  # <dir>/<profile>/<chapter>.json: the book's dashboard shows it beside the other profile
            folder = Path(out, self.profile)
            folder.mkdir(parents=True, exist_ok=True)
            record = dict(payload, recorded=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
            tmp = folder / f".{self.chapter}.json.tmp"
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, folder / f"{self.chapter}.json")
        failed = [c.cid for c in self.items if c.verdict == "FAIL" and not c.known_failure]
        if failed:
            raise AssertionError(f"{len(failed)} claim(s) failed in {self.chapter}: {', '.join(failed)}")


def _decide_text(estimate, rule: Rule, n: int | None, unit: str, undecided: str) -> str:
    """What would decide an INCONCLUSIVE claim: ``"about 36 seeds per head count would decide it at
    the measured value and spread (12 here); <undecided>"``."""
    from ..stats import size_to_decide  # stats imports validate only; claims is imported by stats' users

    if n is None:
        text = "the size that would decide it is not given"
    elif n < 1:
        text = f"nothing to decide it on: no {unit} measured"
    else:
        need = size_to_decide(estimate, rule.decide, n)
        text = (f"about {need:,} {unit} would decide it at the measured value and spread ({n:,} here)" if need
                else f"no number of {unit} would decide it at the measured value (it lies on the condition's "
                     f"boundary, or the interval is unbounded; {n:,} here)")
    return text + (f"; {' '.join(undecided.split())}" if undecided.strip() else "")


def _known(text: str) -> str:
    if not isinstance(text, str) or (text and not text.strip()):
        raise ValueError(f"known_failure={text!r} is invalid: accepted '' or a sentence saying where the claim "
                         "fails and where the chapter shows it")
    return " ".join(text.split())


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


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)``, for the device that ``device`` resolves to."""
    try:
        dev = resolve_device(device)
    except ValueError:  # e.g. device="cuda" where there is none: say what was asked for
        return str(device)
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return dev.type
