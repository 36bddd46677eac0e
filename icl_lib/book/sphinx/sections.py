"""The claims dashboard's findings: each finding counted once, the chance of a wrong verdict, and the
table from the papers' words to the book's rules (:mod:`icl_lib.book.sphinx`).

Every claim a chapter records names its finding (:mod:`icl_lib.claims.findings`); the headline
counts findings per paper and writes one sentence per finding from its claims' verdicts.  The
claims decided on an interval record the share of their error rate at which their verdict still
stands (:mod:`icl_lib.claims.multiplicity`): from those, how many wrong verdicts chance alone could
give, and which verdicts Holm's correction would leave undecided.
"""

from __future__ import annotations

from typing import Callable

from docutils import nodes

from icl_lib.claims.findings import FINDINGS, SOURCES, UNTESTED, finding_verdict
from icl_lib.claims.multiplicity import expected_errors, holm
from icl_lib.claims.words import WORDS

from .render import table, verdict

__all__ = ["findings_section", "multiplicity_section", "words_table", "group_by_finding", "headline_section",
           "fragile_of", "definitions_table"]

_SAY = {"PASS": "reproduces", "FAIL": "does not reproduce", "INCONCLUSIVE": "is undecided",
        "NOT-RUN": "is not run in this profile"}
_BOOK_SAY = {"PASS": "holds", "FAIL": "does not hold", "INCONCLUSIVE": "is undecided",
             "NOT-RUN": "is not run in this profile"}


def group_by_finding(claims: list[dict]) -> dict[str, list[dict]]:
    """``{finding: [claims]}`` in the order of :data:`FINDINGS` (a claim without one under ``""``)."""
    out: dict[str, list[dict]] = {k: [] for k in FINDINGS}
    for c in claims:
        out.setdefault(c.get("finding", ""), []).append(c)
    return {k: v for k, v in out.items() if v}


def _claim_ref(c: dict, link_claim: Callable) -> list[nodes.Node]:
    parts = [link_claim(c)]
    if c["verdict"] in ("PASS", "FAIL") or c.get("interval", "-") == "-":
        parts.append(nodes.Text(f" measured {c['measured']}"))
    if c.get("interval", "-") != "-":
        parts.append(nodes.Text(f" {c['interval']}"))
    parts.append(nodes.Text(" against "))
    parts.append(nodes.literal(text=c["expected"]))
    if c.get("lean"):
        parts.append(nodes.Text(f", leaning {c['lean']}"))
    return parts


def _sentence(key: str, claims: list[dict], link_claim: Callable) -> nodes.paragraph:
    """One finding in words, from its claims' verdicts."""
    f = FINDINGS.get(key)
    own = [c for c in claims if c.get("kind", "paper") != "check"] or claims
    v = finding_verdict(c["verdict"] for c in own)
    para = nodes.paragraph(classes=["icl-finding"])
    para += verdict(v)
    say = (_BOOK_SAY if f is None or f.source in ("book", "checks") else _SAY)[v]
    title = f.title if f else "(no finding named)"
    para += nodes.Text(f" {title} {say}: {f.says if f else ''}.  ")
    chapters = sorted({c["chapter_title"] for c in own})
    decided = [c for c in own if c["verdict"] != "NOT-RUN"]
    if v == "PASS":
        para += nodes.Text(f"{len(decided)} claim{'s' * (len(decided) != 1)} pass ({'; '.join(chapters)}).")
        return para
    for label, which in (("Fails", "FAIL"), ("Undecided", "INCONCLUSIVE")):
        picked = [c for c in decided if c["verdict"] == which]
        if not picked:
            continue
        para += nodes.Text(f"{label}: ")
        for k, c in enumerate(picked):
            if k:
                para += nodes.Text("; ")
            for part in _claim_ref(c, link_claim):
                para += part
        para += nodes.Text(".  ")
    passing = sum(c["verdict"] == "PASS" for c in decided)
    if passing:
        para += nodes.Text(f"{passing} other claim{'s' * (passing != 1)} of the finding pass.")
    return para


def findings_section(claims: list[dict], link_claim: Callable) -> list[nodes.Node]:
    """The headline: per source (paper 1, paper 2, the book), the findings counted by verdict, then
    one sentence per finding.  ``claims``: every claim of the build (dicts with ``chapter_title``);
    ``link_claim(c)``: the node that links a claim to its chapter."""
    groups = group_by_finding(claims)
    out: list[nodes.Node] = []
    for source, name in SOURCES.items():
        keys = [k for k in groups if k in FINDINGS and FINDINGS[k].source == source]
        if not keys:
            continue
        verdicts = [finding_verdict(c["verdict"] for c in groups[k] if c.get("kind", "paper") != "check"
                                    or source == "checks") for k in keys]
        n = {v: verdicts.count(v) for v in ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN")}
        words = _BOOK_SAY if source in ("book", "checks") else _SAY
        head = nodes.paragraph(classes=["icl-source"])
        head += nodes.strong(text=f"{name}: ")
        head += nodes.Text(f"{len(keys)} finding{'s' * (len(keys) != 1)}; " + ", ".join(
            f"{n[v]} {words[v]}" for v in ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN") if n[v]) + ".")
        out.append(head)
        items = nodes.bullet_list()
        for k in keys:
            item = nodes.list_item()
            item += _sentence(k, groups[k], link_claim)
            items += item
        out.append(items)
    return out


def multiplicity_section(claims: list[dict], link_claim: Callable) -> list[nodes.Node]:
    """What chance alone could do to the papers' verdicts decided on an interval, and the claims
    whose verdict Holm's correction would leave undecided."""
    decided = [c for c in claims if c.get("kind", "paper") == "paper" and c.get("share") is not None
               and c["verdict"] in ("PASS", "FAIL")]
    para = nodes.paragraph(classes=["icl-multiplicity"])
    if not decided:
        para += nodes.Text("No claim of the papers is decided on an interval in this build.")
        return [para]
    alphas = [c["alpha"] for c in decided]
    stands = holm({f"{c['chapter']}:{c['cid']}": c["share"] for c in decided})
    flips = [c for c in decided if not stands[f"{c['chapter']}:{c['cid']}"]]
    para += nodes.Text(
        f"Of the papers' claims, {len(decided)} are decided on an interval, each at an error rate of at most "
        f"{100 * min(alphas):g} % to {100 * max(alphas):g} % (an equivalence, two one-sided tests at 5 %): if every "
        f"one of them sat on its rule's boundary, chance alone would give about {expected_errors(alphas):.1f} "
        f"wrong verdicts.  Under Holm's correction, which holds the chance of any wrong verdict among them to one "
        f"claim's rate, {len(flips)} of them would be undecided")
    if flips:
        para += nodes.Text(": ")
        for k, c in enumerate(flips):
            if k:
                para += nodes.Text(", ")
            para += link_claim(c)
            para += nodes.Text(f" ({c['verdict']}, standing at {c['share']:.2g} of its rate)")
    para += nodes.Text(".")
    return [para]


def words_table() -> list[nodes.Node]:
    """The table from the papers' words to the book's rules (:data:`icl_lib.claims.words.WORDS`)."""
    rows = [[nodes.literal(text=key), w.words, w.rule, ", ".join(w.classes)] for key, w in WORDS.items()]
    return [table(["Entry", "The papers' words", "The rule", "Rules (icl_lib.claims)"], rows,
                  ["icl-claims", "icl-rules", "icl-words"])]


def definitions_table() -> list[nodes.Node]:
    """The definitions the verdicts rest on, with their alternatives (:data:`icl_lib.definitions.DEFINITIONS`)."""
    from icl_lib.definitions import DEFINITIONS

    rows = [[nodes.literal(text=d.key), d.says, nodes.literal(text=str(d.value)),
             "; ".join(f"{v}: {w}" for v, w in d.alternatives.items()), d.kind, d.since]
            for d in DEFINITIONS.values()]
    return [table(["Definition", "What it says", "In force", "Declared alternatives", "Kind", "Chosen"], rows,
                  ["icl-claims", "icl-rules", "icl-definitions"])]


def fragile_of(c: dict) -> dict[str, str]:
    """``{definition=alternative: verdict}`` of the declared alternatives that give claim ``c``
    another verdict (:mod:`icl_lib.definitions`)."""
    return {k: v for k, v in (c.get("alternatives") or {}).items()
            if v != c["verdict"] and v not in ("-", "NOT-RUN", "error")}


def _item(label: str, parts: list[nodes.Node]) -> nodes.list_item:
    item = nodes.list_item()
    para = nodes.paragraph()
    para += nodes.strong(text=f"{label}: ")
    for part in parts:
        para += part
    item += para
    return item


def headline_section(claims: list[dict], link_claim: Callable) -> list[nodes.Node]:
    """The dashboard's opening, per paper: how many of its findings reproduce and which; each claim
    that fails, with its measurement against its rule (what the book's data contradict); the
    undecided ones; the verdicts that another declared definition would change; the sentences the
    book does not test."""
    groups = group_by_finding([c for c in claims if c.get("kind", "paper") == "paper"])
    out: list[nodes.Node] = []
    for source in ("P1", "P2"):
        keys = [k for k in groups if k in FINDINGS and FINDINGS[k].source == source]
        own = [c for k in keys for c in groups[k]]
        verdicts = {k: finding_verdict(c["verdict"] for c in groups[k]) for k in keys}
        head = nodes.paragraph(classes=["icl-headline"])
        head += nodes.strong(text=f"{SOURCES[source]}.  ")
        good = [FINDINGS[k].title for k in keys if verdicts[k] == "PASS"]
        bad = [FINDINGS[k].title for k in keys if verdicts[k] == "FAIL"]
        open_ = [FINDINGS[k].title for k in keys if verdicts[k] == "INCONCLUSIVE"]
        head += nodes.Text(
            f"Of {len(keys)} findings, {len(good)} reproduce" + (f" ({'; '.join(good)})" if good else "")
            + (f"; {len(bad)} do not ({'; '.join(bad)})" if bad else "")
            + (f"; {len(open_)} are undecided ({'; '.join(open_)})" if open_ else "")
            + f".  {len(own)} claims decide them: {sum(c['verdict'] == 'PASS' for c in own)} pass, "
            f"{sum(c['verdict'] == 'FAIL' for c in own)} fail, "
            f"{sum(c['verdict'] == 'INCONCLUSIVE' for c in own)} are undecided.")
        out.append(head)
        items = nodes.bullet_list()
        fails = [c for c in own if c["verdict"] == "FAIL"]
        if fails:
            parts: list[nodes.Node] = [nodes.Text("the book's measurements contradict these sentences: ")]
            for i, c in enumerate(fails):
                parts += [nodes.Text("; " if i else ""), nodes.Text(f"\u201c{c['statement']}\u201d ("),
                          *_claim_ref(c, link_claim), nodes.Text(")")]
            items += _item("Does not reproduce", parts + [nodes.Text(".")])
        undecided = [c for c in own if c["verdict"] == "INCONCLUSIVE"]
        if undecided:
            parts = []
            for i, c in enumerate(undecided):
                parts += [nodes.Text("; " if i else ""), *_claim_ref(c, link_claim)]
            items += _item("Undecided", parts + [nodes.Text(" (the table below says what would decide each).")])
        fragile = [c for c in own if fragile_of(c)]
        if fragile:
            parts = [nodes.Text(f"{len(fragile)} verdicts change under another of the book's declared definitions: ")]
            for i, c in enumerate(fragile):
                alt = "; ".join(f"{k}: {v}" for k, v in fragile_of(c).items())
                parts += [nodes.Text("; " if i else ""), link_claim(c), nodes.Text(f" {c['verdict']} ({alt})")]
            items += _item("Fragile", parts + [nodes.Text(".")])
        untested = [u for u in UNTESTED if u.source == source]
        if untested:
            parts = []
            for i, u in enumerate(untested):
                parts += [nodes.Text(("; " if i else "") + f"\u201c{u.quote}\u201d ({u.section}): {u.why}")]
            items += _item("Not tested as written", parts + [nodes.Text(".")])
        if len(items):
            out.append(items)
    return out
