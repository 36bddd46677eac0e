"""Sphinx extension of the book: the claims dashboard and the execution-status page.

Every chapter ends with ``claims.report()`` (``icl_lib.claims``), which prints one line per checked
claim of the papers,

    CLAIM <id> PASS|FAIL measured=<value> expected=<condition>

and records the same claims as JSON in a glue record (key :data:`CLAIMS_GLUE_KEY`, media type
:data:`CLAIMS_MIME`: the paper's statement, the profile, the device, the library versions and the
cell that checked each claim).  While the book builds, this extension reads the lines from each
chapter's page as soon as the chapter has been read (executed, or served from the execution cache)
and the JSON from the chapter's glue data, links every claim to the section of the chapter that
checks it, and fills two placeholders once all documents are read:

* ``{claims-dashboard}``  -- every claim of every chapter, with its verdict, and beside it the verdict
  of the other profile (``quick`` or ``paper``) where a run of that profile recorded its claims
  (``claims.report()`` with ``ICL_CLAIMS_DIR``: ``<icl_claims_dir>/<profile>/<chapter>.json``;
  ``make test`` records its ``nbval`` run's, ``make book`` its own);
* ``{execution-status}``  -- per chapter: when and how long it ran, profile, device, versions;
* ``{rule-changes}``      -- every change to a claim's rule after it was first written, from
  :data:`icl_lib.rule_changes.CHANGES`.

The dashboard's headline counts the papers' claims only; the book's own claims beyond the papers
and its checks of its derivations and design (:data:`icl_lib.claims.KINDS`) are counted and listed
apart.

So both pages always describe the build they are part of; no list of chapters is kept anywhere.
Chapters are found as the notebooks of the table of contents, in its order.

It keeps the pages the record of this code's executions: with ``execute_notebooks: cache`` it
empties the execution cache when ``icl_lib`` changed since the cache was filled, and re-reads a
chapter page whose notebook has a newer execution, or none (:mod:`icl_lib.tools.bookcache`).
It also makes pages that paste values from other pages with ``{glue:text}`path.ipynb::key```
re-render when that notebook is re-read (MyST-NB resolves such references when a page is written,
and would otherwise keep old numbers on an unchanged page), and turns icl_lib's training progress
bars off in the executing kernels (``ICL_PROGRESS=0``): a static page has no use for them, and in a
figure cell they would be a second output (a duplicate figure) or stderr (a build warning).
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from icl_lib.claims import CLAIM_LINE as _PRINTED, CLAIMS_GLUE_KEY, CLAIMS_MIME
from icl_lib.tools import bookcache

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the extension's own modules, beside it
from icl_findings import findings_section, multiplicity_section, words_table  # noqa: E402
from icl_render import VERDICT_CLASS, count_text, link, scroll, table, verdict  # noqa: E402

# The claim lines as the chapters print them (icl_lib.claims.CLAIM_LINE), whose ``expected`` may
# hold spaces: a rule that excludes a named rival prints it as written ("excludes(first order=1)")
CLAIM_LINE = re.compile(_PRINTED.pattern.replace(r"expected=(\S*) ", r"expected=(.*?) "), re.M)
assert CLAIM_LINE.pattern != _PRINTED.pattern

logger = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------
# Placeholders


class claims_dashboard(nodes.General, nodes.Element):
    """Replaced by the claims tables once every chapter has been read."""


class execution_status(nodes.General, nodes.Element):
    """Replaced by the execution-status table once every chapter has been read."""


class rule_changes(nodes.General, nodes.Element):
    """Replaced by the table of rule changes (it needs the builder, to link the chapters)."""


class words_rules(nodes.General, nodes.Element):
    """Replaced by the table from the papers' words to the book's rules."""


class _Placeholder(SphinxDirective):
    node_class: type[nodes.Element]
    has_content = False

    def run(self):
        _state(self.env)["pages"].add(self.env.docname)
        return [self.node_class()]


class ClaimsDashboard(_Placeholder):
    node_class = claims_dashboard


class ExecutionStatus(_Placeholder):
    node_class = execution_status


class WordsRules(_Placeholder):
    node_class = words_rules


class RuleChanges(_Placeholder):
    node_class = rule_changes

    def run(self):
        _state(self.env)["rule_page"] = self.env.docname  # the dashboard links its claims here
        return super().run()


# --------------------------------------------------------------------------------------------
# What the build environment keeps (pickled between builds, so cached chapters keep their data)


def _state(env) -> dict[str, Any]:
    if not hasattr(env, "icl_book"):
        env.icl_book = {"chapters": {}, "pages": set(), "glue_deps": {}}
    return env.icl_book


def _purge(app: Sphinx, env, docname: str) -> None:
    st = _state(env)
    st["chapters"].pop(docname, None)
    st["pages"].discard(docname)
    st["glue_deps"].pop(docname, None)
    if st.get("rule_page") == docname:
        st.pop("rule_page")


def _merge(app: Sphinx, env, docnames: set[str], other) -> None:
    st, ot = _state(env), _state(other)
    for doc in docnames:
        for key in ("chapters", "glue_deps"):
            if doc in ot[key]:
                st[key][doc] = ot[key][doc]
        if doc in ot["pages"]:
            st["pages"].add(doc)
        if ot.get("rule_page") == doc:
            st["rule_page"] = doc


def claim_lines(doctree: nodes.document) -> list[tuple[str, str, str, str]]:
    """The ``CLAIM`` lines that the page shows in its cells' printed output, in order."""
    lines = []
    for out in doctree.findall(nodes.container):
        if out.get("nb_element") != "cell_code_output":
            continue
        for block in out.findall(nodes.literal_block):
            if "stream" in block.get("classes", []):
                lines += CLAIM_LINE.findall(block.astext())
    return lines


def glued_claims(env, docname: str) -> dict:
    """The claims JSON that the chapter glued in this build (empty if none)."""
    try:
        from myst_nb.sphinx_ import NbMetadataCollector
    except ImportError:  # pragma: no cover
        return {}
    if CLAIMS_GLUE_KEY not in (NbMetadataCollector.get_doc_data(env).get(docname, {}).get("glue") or []):
        return {}
    path = Path(env.mystnb_config.output_folder, *docname.split("/"))
    path = path.with_name(path.name + ".glue.json")
    data = json.loads(path.read_text(encoding="utf8"))
    return data[CLAIMS_GLUE_KEY]["data"].get(CLAIMS_MIME, {})


def _cell_sections(doctree: nodes.document) -> dict[int, tuple[str, str]]:
    """Execution count of each code cell -> (id, title) of the section that holds it."""
    found = {}
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code" or cell.get("exec_count") is None:
            continue
        sec = cell.parent
        while sec is not None and not isinstance(sec, nodes.section):
            sec = sec.parent
        if sec is not None and sec["ids"]:
            title = sec[0].astext() if len(sec) and isinstance(sec[0], nodes.title) else ""
            found[int(cell["exec_count"])] = (sec["ids"][0], title)
    return found


def _collect(app: Sphinx, doctree: nodes.document) -> None:
    """After a document is read: its glue dependencies and, for a notebook, its claims."""
    env = app.env
    docname = env.docname
    st = _state(env)

    try:
        from myst_nb.ext.glue.utils import PendingGlueReference
    except ImportError:  # pragma: no cover - MyST-NB is what builds the book
        PendingGlueReference = None
    if PendingGlueReference is not None:
        deps = {n.refdoc for n in doctree.findall(PendingGlueReference)}
        if deps:
            st["glue_deps"][docname] = deps

    if not str(env.doc2path(docname)).endswith(".ipynb"):
        return
    lines = claim_lines(doctree)
    if not lines:
        logger.warning(
            "chapter printed no CLAIM line: its last cell must call claims.report()",
            location=docname, type="icl", subtype="claims",
        )
    glued = glued_claims(env, docname)
    if lines and not glued:
        logger.warning(
            "chapter printed CLAIM lines but glued no claims JSON: are its outputs from an older "
            "icl_lib in the execution cache? (delete _build/.jupyter_cache to execute it again)",
            location=docname, type="icl", subtype="claims",
        )
    meta = {k: v for k, v in glued.items() if k != "claims"}
    detail = {c["cid"]: c for c in glued.get("claims", [])}
    sections = _cell_sections(doctree)
    title = env.titles[docname].astext() if docname in env.titles else docname
    claims = []
    for cid, verdict, measured, interval, expected, profiles in lines:
        d = detail.get(cid)
        if d is None and glued:
            logger.warning(
                f"claim {cid!r} has a CLAIM line but no entry in the claims JSON output",
                location=docname, type="icl", subtype="claims",
            )
        if d is None:
            d = {}
        elif (d.get("verdict"), d["measured"], d.get("interval"), d["expected"]) != (verdict, measured, interval, expected):
            logger.warning(
                f"claim {cid!r}: the CLAIM line and the claims JSON output disagree",
                location=docname, type="icl", subtype="claims",
            )
        anchor, section = sections.get(d.get("cell"), ("", ""))
        claims.append(
            {
                "cid": cid,
                "verdict": verdict,
                "measured": measured,
                "interval": interval,
                "expected": expected,
                "profiles": profiles,
                "statement": d.get("statement", ""),
                "paper_section": d.get("section", ""),
                "profile": d.get("profile", meta.get("profile", "")),
                "anchor": anchor,
                "section": section,
                "known_failure": d.get("known_failure", ""),
                "kind": d.get("kind", "paper"),
                "decide": d.get("decide", ""),
                **{k: d.get(k, "") for k in ("finding", "rule_source", "estimand", "population", "rival", "lean")},
                "share": d.get("share"),
                "alpha": d.get("alpha"),
            }
        )
    st["chapters"][docname] = {"title": title, "meta": meta, "claims": claims}


def _stale_executions(app: Sphinx, env, added: set, changed: set, removed: set) -> list[str]:
    """Chapter pages to read again although their source is unchanged: with ``execute_notebooks:
    cache``, the execution cache is emptied when ``icl_lib`` changed since it was filled, and a
    page is re-read when its notebook has no cached execution any more or a newer one (executed
    again by ``make book``'s pre-execution) -- never rendered from an old execution."""
    cfg = getattr(env, "mystnb_config", None)
    if cfg is None or cfg.execution_mode != "cache":
        return []
    cache_path = cfg.execution_cache_path
    if bookcache.clear_if_stale(cache_path):
        logger.info("icl_book: icl_lib changed since the cached executions: every chapter executes again")
    stale = []
    for docname, read_at in env.all_docs.items():
        path = Path(env.doc2path(docname))
        if docname in changed or docname in removed or path.suffix != ".ipynb" or not path.exists():
            continue
        if bookcache.needs_reading(cache_path, path, read_at):
            stale.append(docname)
    return stale


def _before_read(app: Sphinx, env, docnames: list[str]) -> None:
    app.icl_book_reread = set(docnames)


def _pages_to_rewrite(app: Sphinx, env) -> list[str]:
    """The dashboard pages always (they summarise the whole build) and glue pastes of re-read notebooks."""
    st = _state(env)
    reread = getattr(app, "icl_book_reread", set())
    pages = set(st["pages"])
    pages |= {doc for doc, deps in st["glue_deps"].items() if deps & reread}
    return sorted(pages & set(env.all_docs))


# --------------------------------------------------------------------------------------------
# Rendering


def _toc_order(env, root: str) -> list[str]:
    order, seen = [], set()

    def walk(doc: str) -> None:
        if doc in seen:
            return
        seen.add(doc)
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order


def _chapters(app: Sphinx) -> list[tuple[str, dict]]:
    """Every notebook chapter of the book, in the order of the table of contents."""
    env = app.env
    order = _toc_order(env, app.config.root_doc)
    notebooks = [d for d in env.found_docs if str(env.doc2path(d)).endswith(".ipynb")]
    docs = [d for d in order if d in notebooks] + sorted(d for d in notebooks if d not in order)
    st = _state(env)
    return [(d, st["chapters"].get(d, {"title": d, "meta": {}, "claims": []})) for d in docs]


def _condition_cell(c: dict) -> list[nodes.Node]:
    """The rule as printed, where it comes from (the words-to-rules table, or why it departs from
    it), the population it is measured on, and the finding it belongs to."""
    cell: list[nodes.Node] = [nodes.literal(text=c["expected"])]
    for key, label in (("rule_source", ""), ("population", "on: "), ("finding", "finding: ")):
        if c.get(key):
            cell.append(nodes.inline(text=f" {label}{c[key]}", classes=[f"icl-{key.replace('_', '-')}"]))
    return cell


def _verdict_cell(c: dict) -> list[nodes.Node]:
    """The verdict; for a reported non-reproduction the chapter's report of it; for an undecided
    claim what would decide it."""
    cell = [verdict(c["verdict"])]
    if c.get("known_failure"):
        note = nodes.inline(classes=["icl-known-failure"])
        note += nodes.Text(f" reported not to reproduce: {c['known_failure']}")
        cell.append(note)
    if c.get("decide"):
        cell.append(nodes.inline(text=f" undecided: {c['decide']}", classes=["icl-decide"]))
    return cell


def _changes_note(app: Sphinx, fromdoc: str, chapter: str, cid: str) -> list[nodes.Node]:
    """``rule changed 2026-12-04`` linked to the rule-change page, for a claim with listed changes."""
    from icl_lib.rule_changes import changes_of

    found = changes_of(chapter, cid)
    page = _state(app.env).get("rule_page")
    if not found or page is None:
        return []
    dates = ", ".join(sorted({c.date for c in found}))
    note = nodes.inline(classes=["icl-rule-changed"])
    note += link(app, fromdoc, page, f"rule changed {dates}", anchor=f"rule-{chapter}-{cid}")
    return [note]


def _recorded(app: Sphinx, profile: str) -> dict[str, dict]:
    """Chapter -> the claims a run of ``profile`` recorded (``Claims.report`` with ``ICL_CLAIMS_DIR``),
    read from ``<srcdir>/<icl_claims_dir>/<profile>/``; unreadable files are warned about and left out.
    A chapter no run of this build recorded falls back to its committed record
    (:mod:`icl_lib.tools.records`, chapter 8's paper profile) when that is current; a stale one
    is warned about and kept only as ``{"stale": [changed parts], ...}``, without its verdicts."""
    cache = app.__dict__.setdefault("icl_recorded", {})
    if profile not in cache:
        root = Path(app.srcdir, app.config.icl_claims_dir, profile)
        found = {}
        for f in sorted(root.glob("*.json")) if root.is_dir() else []:
            try:
                data = json.loads(f.read_text())
                if data.get("profile") != profile:
                    raise ValueError(f"it records profile {data.get('profile')!r}")
                found[data["chapter"]] = data
            except (OSError, ValueError, KeyError, TypeError) as err:
                logger.warning(f"recorded claims {f} left out: {err}", type="icl", subtype="claims")
        for chapter, st in _committed(app, profile).items():
            if chapter in found:
                continue
            if st["current"]:
                found[chapter] = dict(st["record"], committed=True)
            else:
                # a chapter whose paper runs the store lacks cannot be recorded yet (it is built in
                # quick): its stale record is expected and shown as stale; any other is a warning
                say = logger.info if _runs_missing(app, chapter) else logger.warning
                say(f"the committed {profile} record of {chapter} is stale (changed since: "
                    f"{', '.join(st['changed'])}): python -m icl_lib record run {chapter}",
                    type="icl", subtype="records")
                found[chapter] = {"stale": st["changed"], "recorded": st["record"].get("recorded"), "claims": []}
        cache[profile] = found
    return cache[profile]


def _runs_missing(app: Sphinx, chapter: str) -> bool:
    """Whether ``chapter`` trains and the run store lacks some runs of its paper plan."""
    if not hasattr(app, "icl_runs_missing"):
        from icl_lib.engine.store import RunStore
        from icl_lib.tools.plan import book_plan

        plan, store = book_plan("paper"), RunStore()
        app.icl_runs_missing = {name: not store.status(specs)["complete"] for name, specs in plan.items()}
    return app.icl_runs_missing.get(chapter, False)


def _committed(app: Sphinx, profile: str) -> dict[str, dict]:
    """Chapter -> :func:`icl_lib.tools.records.status` of each committed record of ``profile`` in
    the checkout the book is built from (none in a book without ``results/records``)."""
    if not Path(app.srcdir, "results", "records", profile).is_dir():
        return {}
    from icl_lib.tools import records

    return {c: st for c in records.RECORDED if records.RECORDED[c].profile == profile
            and (st := records.status(c, app.srcdir))["record"] is not None}


def _other(profile: str) -> str:
    return "paper" if profile == "quick" else "quick"


def _other_cell(other: str, recorded: dict | None, cid: str) -> nodes.Node:
    """The other profile's verdict of claim ``cid``, shown under this build's (not an
    ``icl-verdict``: that class marks this build's verdict)."""
    if recorded is None:
        return nodes.inline(text=f"{other}: no recorded run", classes=["icl-other", "icl-notrun"])
    if "stale" in recorded:
        return nodes.inline(text=f"{other}: recorded run stale", classes=["icl-other", "icl-notrun"])
    c = next((c for c in recorded.get("claims", []) if c.get("cid") == cid), None)
    if c is None:
        return nodes.inline(text=f"{other}: not in the recorded run", classes=["icl-other", "icl-notrun"])
    verdict = c.get("verdict", "?")
    text = "not run in that profile" if verdict == "NOT-RUN" else verdict
    cell = nodes.inline(classes=["icl-other", VERDICT_CLASS.get(verdict, "icl-fail")])
    cell += nodes.Text(f"{other}: {text}")
    if c.get("interval", "-") != "-":
        cell += nodes.Text(f" {c.get('measured', '')} {c['interval']}")
    return cell


def _recorded_text(other: str, recorded: dict | None) -> str:
    if recorded is None:
        return f"{other} profile: no recorded run"
    when = recorded.get("recorded", "an unknown date")
    if "stale" in recorded:
        return (f"{other} profile: the committed run of {when} is stale (changed since: "
                f"{', '.join(recorded['stale'])}); its verdicts are not shown")
    if recorded.get("committed"):
        return (f"{other} profile: committed run of {when} on {recorded.get('device', '?')} (icl_lib "
                f"{recorded.get('icl_lib', '?')}, {recorded.get('seconds', 0) / 60:.0f} min, "
                f"{recorded.get('command', '?')}): {count_text(recorded.get('claims', []))}")
    return (f"{other} profile: recorded run of {when} on {recorded.get('device', '?')} (icl_lib "
            f"{recorded.get('icl_lib', '?')}): {count_text(recorded.get('claims', []))}")


_KIND_TITLES = {
    "paper": "The papers' claims",
    "beyond": "Beyond the papers: the book's own claims",
    "check": "Checks of the book's own derivations, samplers and design (not claims of the papers)",
}


def _kind_counts(claims: list[dict], kinds=("paper", "beyond", "check")) -> str:
    """``"143 claims of the papers: ...; 12 beyond the papers: ...; 20 checks: ..."`` (of ``kinds``)."""
    parts = []
    for kind, label in (("paper", "claims of the papers"), ("beyond", "claims beyond the papers"),
                        ("check", "checks of the book's own derivations and design")):
        if kind not in kinds:
            continue
        of = [c for c in claims if c.get("kind", "paper") == kind]
        if of or kind == "paper":
            parts.append(f"{len(of)} {label}: {count_text(of)}")
    return "; ".join(parts)


def _dashboard(app: Sphinx, fromdoc: str) -> list[nodes.Node]:
    chapters = _chapters(app)
    all_claims = [dict(c, chapter=doc.rsplit("/", 1)[-1], chapter_title=ch["title"], doc=doc)
                  for doc, ch in chapters for c in ch["claims"]]
    papers = [c for c in all_claims if c.get("kind", "paper") == "paper"]

    def link_claim(c: dict) -> nodes.Node:
        return link(app, fromdoc, c["doc"], c["cid"], c["anchor"], literal=True)

    out: list[nodes.Node] = [nodes.rubric(text="The findings", classes=["icl-findings"])]
    out += findings_section(all_claims, link_claim)
    out.append(nodes.rubric(text="Chance", classes=["icl-findings"]))
    out += multiplicity_section(all_claims, link_claim)
    out.append(nodes.rubric(text="Every claim, chapter by chapter", classes=["icl-findings"]))
    summary = nodes.paragraph(classes=["icl-summary"])
    summary += nodes.Text(
        f"This build checks {len(papers)} claim{'s' * (len(papers) != 1)} of the two papers in "
        f"{len(chapters)} chapter{'s' * (len(chapters) != 1)}: {count_text(papers)}.  "
    )
    rest = [c for c in all_claims if c.get("kind", "paper") != "paper"]
    if rest:
        summary += nodes.Text(
            "Apart from them, and not counted with them: "
            + _kind_counts(all_claims, kinds=("beyond", "check")) + ".  "
        )
    summary += nodes.Text(
        "A claim is decided on the interval of its measurement: PASS when all of it satisfies the "
        "condition, FAIL when none of it does, INCONCLUSIVE when the data cannot decide (beside it, which "
        "way it leans and what would decide it); a claim declared only for another profile is listed as "
        "not run.  A claim that was written before the run and did not reproduce keeps its verdict and is "
        "marked as reported by its chapter, which shows the evidence.  A claim whose rule changed after it "
        "was written links to the rule-change page."
    )
    out.append(summary)
    for doc, ch in chapters:
        claims = ch["claims"]
        profile = ch["meta"].get("profile", "quick")
        other = _other(profile)
        name = doc.rsplit("/", 1)[-1]
        recorded = _recorded(app, other).get(name)
        rubric = nodes.rubric(classes=["icl-chapter"])
        rubric += link(app, fromdoc, doc, ch["title"])
        out.append(rubric)
        out.append(
            nodes.paragraph(
                text=f"{_kind_counts(claims)} (profile {profile}, device {ch['meta'].get('device', '?')}); "
                f"{_recorded_text(other, recorded)}."
            )
        )
        if not claims:
            out.append(nodes.paragraph(text="This chapter reported no claims in this build."))
            continue
        headers = ["Claim (section)", "Statement", "Measured", "Interval", "Condition (its source; whom)",
                   f"Verdict ({other} below)", "Declared for"]
        for kind, title in _KIND_TITLES.items():
            of = [c for c in claims if c.get("kind", "paper") == kind]
            if not of:
                continue
            if any(c.get("kind", "paper") != "paper" for c in claims):
                out.append(nodes.paragraph(text=title, classes=["icl-kind"]))
            rows = [
                [
                    [
                        link(app, fromdoc, doc, c["cid"], c["anchor"], literal=True),
                        nodes.inline(text=c["section"] or ch["title"], classes=["icl-section"]),
                        *_changes_note(app, fromdoc, name, c["cid"]),
                    ],
                    [nodes.inline(text=c["paper_section"], classes=["icl-paper-section"]), nodes.Text(" "),
                     nodes.Text(c["statement"])] if c["paper_section"] else c["statement"],
                    nodes.literal(text=c["measured"]),
                    nodes.literal(text=c["interval"]),
                    _condition_cell(c),
                    [*_verdict_cell(c), nodes.paragraph("", "", _other_cell(other, recorded, c["cid"]))],
                    c["profiles"].replace(",", ", "),
                ]
                for c in of
            ]
            out.append(scroll(table(headers, rows, ["icl-claims"])))
    return out


def _verdict_changes(verdicts) -> list[nodes.Node] | str:
    """``label: BEFORE → AFTER`` per claim, one per line ("-" when none were recorded)."""
    if not verdicts:
        return "-"
    out = []
    for i, (label, before, after) in enumerate(verdicts):
        out += [nodes.raw("", "<br/>", format="html")] if i else []
        out += [nodes.literal(text=label), nodes.Text(": ")] if len(verdicts) > 1 or "->" in label else []
        out += [verdict(before) if before != "-" else nodes.Text("-"), nodes.Text(" → "),
                verdict(after) if after != "-" else nodes.Text("-")]
    return out


def _rule_changes(app: Sphinx, fromdoc: str) -> list[nodes.Node]:
    """Every listed change to a claim's rule, chapter by chapter, newest first within a chapter."""
    from icl_lib.rule_changes import CHANGES

    if not CHANGES:
        return [nodes.paragraph(text="No claim's rule has changed since it was written.")]
    docs = {d.rsplit("/", 1)[-1]: d for d, _ in _chapters(app)}
    rows = []
    for c in sorted(CHANGES, key=lambda c: (c.chapter, c.claims, c.date)):
        target = nodes.inline(ids=[f"rule-{c.chapter}-{cid}" for cid in c.claims])
        chapter = link(app, fromdoc, docs[c.chapter], c.chapter) if c.chapter in docs else c.chapter
        rows.append([
            [target, *[part for cid in c.claims for part in (nodes.literal(text=cid), nodes.Text(" "))]],
            chapter,
            c.date,
            nodes.literal(text=c.before),
            nodes.literal(text=c.after),
            c.why,
            "yes" if c.after_run else "no",
            _verdict_changes(c.verdicts),
        ])
    headers = ["Claim", "Chapter", "Date", "Rule before", "Rule after", "Why", "After a run", "Verdict before → after"]
    return [scroll(table(headers, rows, ["icl-claims", "icl-rules"]))]


def _store_summary(app: Sphinx) -> dict[str, str]:
    """Per chapter, what the committed run store holds of its paper-profile runs (trained once on a
    GPU): ``"24 of 24 runs stored, trained on cuda (...), <date>"`` or ``"0 of 24 runs stored"``."""
    if not hasattr(app, "icl_store_summary"):
        from icl_lib.tools import plan
        from icl_lib.tools.plan_training import store_summary

        book = Path(app.srcdir) / "book"
        try:
            app.icl_store_summary = store_summary(plan.book_plan("paper", book if book.exists() else plan.BOOK))
        except Exception as err:  # noqa: BLE001 - the status page says so instead of failing the build
            logger.warning(f"run store summary unavailable: {err}", type="icl", subtype="store")
            app.icl_store_summary = {}
    return app.icl_store_summary


def _record_note(app: Sphinx, chapter: str) -> str:
    """``"; paper run recorded <date> on <device> (current)"`` for a chapter with a committed record."""
    st = _committed(app, "paper").get(chapter)
    if st is None:
        return ""
    rec = st["record"]
    return (f"; paper run recorded {rec.get('recorded', '?')} on {rec.get('device', '?')} "
            f"({'current' if st['current'] else 'stale'})")


def _when(ts) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if ts else "-"


def _status(app: Sphinx, fromdoc: str) -> list[nodes.Node]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector

        exec_data = {d: v.get("exec_data") or {} for d, v in NbMetadataCollector.get_doc_data(app.env).items()}
    except ImportError:  # pragma: no cover
        exec_data = {}
    stored = _store_summary(app)
    rows = []
    for doc, ch in _chapters(app):
        ex, meta, claims = exec_data.get(doc, {}), ch["meta"], ch["claims"]
        runtime = ex.get("runtime")
        ok = ex.get("succeeded")
        rows.append(
            [
                link(app, fromdoc, doc, ch["title"]),
                _when(ex.get("mtime")),
                "-" if runtime is None else f"{runtime:.1f}",
                "succeeded" if ok else (f"failed ({ex.get('error') or '?'})" if ok is False else "-"),
                meta.get("profile", "-"),
                meta.get("device", "-"),
                meta.get("icl_lib", "-"),
                meta.get("torch", "-"),
                count_text(claims),
                stored.get(name := doc.rsplit("/", 1)[-1], "trains nothing") + _record_note(app, name),
            ]
        )
    headers = ["Chapter", "Executed", "Run time (s)", "Status", "Profile", "Device", "icl_lib", "torch", "Claims",
               "Paper profile: run store"]
    return [scroll(table(headers, rows, ["icl-status"]))]


def _fill(app: Sphinx, doctree: nodes.document, fromdoc: str) -> None:
    for node in list(doctree.findall(claims_dashboard)):
        node.replace_self(_dashboard(app, fromdoc))
    for node in list(doctree.findall(execution_status)):
        node.replace_self(_status(app, fromdoc))
    for node in list(doctree.findall(rule_changes)):
        node.replace_self(_rule_changes(app, fromdoc))
    for node in list(doctree.findall(words_rules)):
        node.replace_self(words_table())


def _quiet_progress_bars(app: Sphinx, config) -> None:
    # The kernels that execute the chapters inherit this process's environment.  A training
    # progress bar in a figure cell would be a second output there (a widget, or stderr text).
    os.environ.setdefault("ICL_PROGRESS", "0")


def _html_assets(app: Sphinx) -> None:
    """Add this extension's CSS; check that the local MathJax (``make mathjax``) is in place."""
    if app.builder.format != "html":
        return
    app.config.html_static_path.append(str(Path(__file__).with_name("static")))
    path = app.config.mathjax_path
    if "://" in path or path.startswith("/"):
        return
    extra = [Path(app.confdir, d) for d in app.config.html_extra_path]
    if not any(d.joinpath("_static", path).is_file() for d in extra):
        from sphinx.errors import ExtensionError

        raise ExtensionError(
            f"MathJax is served from the book itself (mathjax_path={path!r}), but no folder of "
            f"html_extra_path={app.config.html_extra_path!r} holds _static/{path}: run `make mathjax` "
            "(it installs the npm package mathjax@3 and copies it there), or use `make book`."
        )


def _dedupe_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop repeated identical script tags from a page.

    sphinx-thebe registers its inline ``const THEBE_JS_URL = ...`` script in a way that reaches
    the page twice (once named ``None``, once ``''``), and the second declaration is a JavaScript
    SyntaxError on every page.  Scripts with the same source, body and attributes run once.
    """
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, kept = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {})
        key = (os.fspath(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("icl_claims_dir", "_build/claims", "env")  # where runs record their claims
    app.add_node(claims_dashboard)
    app.add_node(execution_status)
    app.add_node(rule_changes)
    app.add_node(words_rules)
    app.add_directive("claims-dashboard", ClaimsDashboard)
    app.add_directive("execution-status", ExecutionStatus)
    app.add_directive("rule-changes", RuleChanges)
    app.add_directive("words-to-rules", WordsRules)
    app.connect("config-inited", _quiet_progress_bars)
    app.connect("builder-inited", _html_assets)
    app.connect("env-get-outdated", _stale_executions)
    app.connect("env-before-read-docs", _before_read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("doctree-read", _collect)
    app.connect("env-updated", _pages_to_rewrite)
    app.connect("doctree-resolved", _fill)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.add_css_file("icl_book.css")
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
