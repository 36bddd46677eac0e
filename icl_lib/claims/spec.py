"""A chapter's claims as data, written before the runs that decide them.

Each claim a chapter decides is declared once, in its chapter's module of
:mod:`icl_lib.claimsets`, as a :class:`ClaimSpec`: the paper's words and section (written once:
the chapter and the dashboard quote them from here), its kind, the finding it belongs to
(:mod:`icl_lib.claims.findings`), the rule and where it comes from (a word of the table
:data:`icl_lib.claims.words.WORDS`, or why it departs from it), the estimand and the population
it is measured on, the nearest rival, and the profiles it is claimed in.  A chapter then decides
a claim in one line, ``claims.decide("kq-diagonal", estimate, H=2, n=36)``, and the dashboard,
the rule-change page and the committed records read the same declaration.

An id may hold fields in braces (``"kq-diagonal-H{H}"``), filled by the chapter when it decides
the claim for one value (``H=2``); the quote may use the same fields.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Iterable

from ..validate import check_choice, fail
from .rules import Rule

__all__ = ["ClaimSpec", "ChapterClaims", "KINDS", "PROFILES", "POPULATIONS"]

# what a claim is about: a paper's statement, the book's own finding beyond the papers, or a check
# of the book's derivations, samplers, invariances and design
KINDS = ("paper", "beyond", "check")
PROFILES = ("quick", "paper")  # the profiles a claim can be declared for
# whom a claim is measured on: every seed (run, model) of its group, or only the runs that formed
# paper 1's pattern (a claim about the pattern's dynamics; the chapter prints how many it leaves out)
POPULATIONS = ("every seed", "pattern runs", "not seeds")
_ID = re.compile(r"^[a-z0-9][a-z0-9.{}/_-]*$", re.I)


@dataclass(frozen=True)
class ClaimSpec:
    """One claim, declared before its run (see the module).

    ``rule`` is a :class:`~icl_lib.claims.rules.Rule` for a claim decided on an interval, or the
    condition in words for one decided exactly (``"every model"``).  ``word``: the entry of the
    words-to-rules table the rule follows (``"consistently"``); ``departs``: why it departs from
    that table, said beside the quote (empty when it follows it).  ``rival``: the nearest rival's
    name, or several names (their values are the chapter's to compute and pass when it decides the
    claim: the rule then also requires the interval to exclude them).  ``known_failure``: the
    chapter's report of where the claim, as written, did not reproduce (shown with a verdict other
    than PASS).  ``population``: one of :data:`POPULATIONS`.
    ``written``: the date the rule was written (before the run that decides it)."""

    id: str
    quote: str
    section: str
    kind: str
    finding: str
    rule: Rule | str
    estimand: str
    word: str = ""
    departs: str = ""
    population: str = "every seed"
    rival: str | tuple = ""
    profiles: tuple = PROFILES
    unit: str = "seeds"
    undecided: str = ""
    known_failure: str | dict = ""  # a text, {profile: text}, or {filled id: text} for a claim of several ids
    written: str = ""
    no_rival: str = ""  # why a claim read as an equivalence or identity has no meaningful rival
    margin_departs: str = ""  # why its margin departs from the margin rule

    def __post_init__(self):
        if not _ID.match(self.id) or " " in self.id:
            fail("id", self.id, "a claim id without spaces (fields in braces allowed)")
        check_choice("kind", self.kind, KINDS)
        check_choice("population", self.population, POPULATIONS)
        for name in ("quote", "section", "finding", "estimand"):
            if not str(getattr(self, name)).strip():
                fail(name, getattr(self, name), f"a non-empty text (claim {self.id!r})")
        if not isinstance(self.rule, (Rule, str)) or (isinstance(self.rule, str) and not self.rule.strip()):
            fail("rule", self.rule, f"a Rule or a condition in words (claim {self.id!r})")
        profiles = (self.profiles,) if isinstance(self.profiles, str) else tuple(self.profiles)
        if not profiles or any(p not in PROFILES for p in profiles):
            fail("profiles", self.profiles, f"a non-empty subset of {PROFILES}")
        object.__setattr__(self, "profiles", profiles)
        known = self.known_failure
        if not isinstance(known, (str, dict)) or (isinstance(known, str) and known and not known.strip()):
            fail("known_failure", known, f"a report in words, {{profile: report}}, {{id: report}}, {{id: "
                                         f"{{profile: report}}}} or empty (claim {self.id!r})")
        if self.written and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.written):
            fail("written", self.written, "a date YYYY-MM-DD")
        from .findings import FINDINGS
        from .words import WORDS, follows

        if self.finding not in FINDINGS:
            fail("finding", self.finding, f"a finding of icl_lib.claims.findings (claim {self.id!r})")
        if self.word and self.word not in WORDS:
            fail("word", self.word, f"an entry of the words-to-rules table {sorted(WORDS)} (claim {self.id!r})")
        if self.kind == "paper" and not (self.word or self.departs.strip()):
            fail("word", self.word, f"the table's entry the rule of paper claim {self.id!r} follows, or departs=why")
        if self.word and not self.departs.strip() and not follows(self.rule, self.word):
            fail("rule", getattr(self.rule, "text", self.rule),
                 f"a rule the table's entry {self.word!r} calls for ({WORDS[self.word].rule}), or departs=why "
                 f"(claim {self.id!r})")
    @property
    def reads_equivalence(self) -> bool:
        """Whether the claim is read as an equivalence or an identity: its entry asks for a rival, or
        its rule is an equivalence (two one-sided tests)."""
        from .words import reads_equivalence

        return reads_equivalence(self.word) or "equiv[" in getattr(self.rule, "text", "")

    def unbound(self) -> list[str]:
        """What binds a paper claim to the table and is missing (a test holds every declaration to
        none): its quote without a word of its entry (and no departure said), or a reading as an
        equivalence or identity without its rival (and no reason given)."""
        from .words import WORDS, names_words

        out = []
        if self.kind != "paper":
            return out
        if self.word and not self.departs.strip() and not names_words(self.quote, self.word):
            out.append(f"quote without a word of the entry {self.word!r} ({WORDS[self.word].words}) and no departs")
        if self.reads_equivalence and not (self.rival or self.no_rival.strip()):
            out.append("read as an equivalence or identity without a rival and no no_rival")
        return out

    @property
    def fields(self) -> tuple[str, ...]:
        """The names in braces of the id (``("H",)`` for ``"kq-diagonal-H{H}"``)."""
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.id) if name)

    def fill(self, **values) -> tuple[str, str]:
        """``(id, quote)`` with the fields filled by ``values`` (every field of the id needed)."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            fail(missing[0], None, f"a value for the field {missing[0]!r} of claim {self.id!r}")
        return self.id.format(**values), self.quote.format(**values) if "{" in self.quote else self.quote


@dataclass(frozen=True)
class ChapterClaims:
    """Every claim of one chapter (its notebook's name, ``NN_topic``), in order."""

    chapter: str
    specs: tuple[ClaimSpec, ...] = field(default_factory=tuple)

    def __post_init__(self):
        specs = tuple(self.specs)
        ids = [s.id for s in specs]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            fail("specs", dup, f"claims of distinct ids (chapter {self.chapter})")
        object.__setattr__(self, "specs", specs)

    def __iter__(self) -> Iterable[ClaimSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def get(self, key: str) -> ClaimSpec:
        """The claim declared as ``key``: its id as written (``"kq-diagonal-H{H}"``), or that id
        without its fields (``"kq-diagonal"``) where no other claim has the same stem."""
        hits = [s for s in self.specs if s.id == key]
        if not hits:
            hits = [s for s in self.specs if s.fields and _stem(s.id) == key]
        if len(hits) != 1:
            fail("claim", key, f"a claim declared in {self.chapter} ({', '.join(s.id for s in self.specs)})")
        return hits[0]

    def find(self, cid: str) -> ClaimSpec | None:
        """The declaration a decided id (``"kq-diagonal-H2"``) comes from, or ``None``."""
        for s in self.specs:
            if s.id == cid or (s.fields and _pattern(s.id).fullmatch(cid)):
                return s
        return None


def _stem(template: str) -> str:
    """The id without its fields and the letters that name them (``"kq-diagonal-H{H}"`` ->
    ``"kq-diagonal"``, ``"omega-depends-on-{factor}"`` -> ``"omega-depends-on"``)."""
    return re.sub(r"[-_]?[A-Za-z]*\{[^}]*\}", "", template).rstrip("-_")


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{[^}]*\}", template)
    return re.compile(r"[^\s]+?".join(re.escape(p) for p in parts))
