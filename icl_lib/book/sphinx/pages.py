"""The pages the book's extension fills (:mod:`icl_lib.book.sphinx`): the claims dashboard, the rule-change
page and the execution-status page, each built from what the build environment keeps of every
chapter (:func:`_state`), the committed records and the run store."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from .sections import findings_section, fragile_of, headline_section, multiplicity_section
from .render import VERDICT_CLASS, count_text, link, scroll, table, verdict

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# What the build environment keeps (pickled between builds, so cached chapters keep their data)


def _state(env) -> dict[str, Any]:
    if not hasattr(env, "icl_book"):
        env.icl_book = {"chapters": {}, "pages": set(), "glue_deps": {}}
    return env.icl_book


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
    for key, label in (("rule_source", ""), ("population", "on: "), ("whole", "every seed: "),
                       ("margin", "margin: "), ("finding", "finding: ")):
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
    if c.get("design") and "cannot" in c["design"]:
        cell.append(nodes.inline(text=f" design: {c['design']}", classes=["icl-design"]))
    fragile = fragile_of(c)
    if fragile:
        cell.append(nodes.inline(text=" fragile: " + "; ".join(f"{k} gives {v}" for k, v in fragile.items()),
                                 classes=["icl-fragile"]))
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
    (:mod:`icl_lib.book.records`, chapter 8's paper profile) when that is current; a stale one
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
        from icl_lib.book.plan import book_plan

        plan, store = book_plan("paper"), RunStore()
        app.icl_runs_missing = {name: not store.status(specs)["complete"] for name, specs in plan.items()}
    return app.icl_runs_missing.get(chapter, False)


def _committed(app: Sphinx, profile: str) -> dict[str, dict]:
    """Chapter -> :func:`icl_lib.book.records.status` of each committed record of ``profile`` in
    the checkout the book is built from (none in a book without ``results/records``)."""
    if not Path(app.srcdir, "results", "records", profile).is_dir():
        return {}
    from icl_lib.book import records

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


def _all_claims(app: Sphinx) -> list[dict]:
    """Every claim of the build, each with its chapter; a claim of a chapter built in the paper
    profile also carries the verdicts under the declared alternatives that its committed record
    (current) holds (:mod:`icl_lib.book.records`)."""
    committed = _committed(app, "paper")
    out = []
    for doc, ch in _chapters(app):
        name = doc.rsplit("/", 1)[-1]
        st = committed.get(name)
        alts = ({c["cid"]: c.get("alternatives") or {} for c in st["record"].get("claims", [])}
                if st and st["current"] and ch["meta"].get("profile") == "paper" else {})
        for c in ch["claims"]:
            merged = {**alts.get(c["cid"], {}), **(c.get("alternatives") or {})}
            out.append(dict(c, chapter=name, chapter_title=ch["title"], doc=doc, alternatives=merged))
    return out


def _headline(app: Sphinx, fromdoc: str) -> list[nodes.Node]:
    """The dashboard's opening (:func:`~icl_lib.book.sphinx.sections.headline_section`)."""
    def link_claim(c: dict) -> nodes.Node:
        return link(app, fromdoc, c["doc"], c["cid"], c["anchor"], literal=True)

    return headline_section(_all_claims(app), link_claim)


def _dashboard(app: Sphinx, fromdoc: str) -> list[nodes.Node]:
    chapters = _chapters(app)
    all_claims = _all_claims(app)
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
        claims = [c for c in all_claims if c["doc"] == doc]
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
    """Every listed change to a claim's rule, chapter by chapter, newest first within a chapter, each
    with its net effect; first, the net effect of every change made after a run and of every move
    between the committed records (:mod:`icl_lib.book.ledger`)."""
    from icl_lib.book import ledger
    from icl_lib.rule_changes import CHANGES, net_effect

    if not CHANGES:
        return [nodes.paragraph(text="No claim's rule has changed since it was written.")]
    docs = {d.rsplit("/", 1)[-1]: d for d, _ in _chapters(app)}
    after = net_effect([c for c in CHANGES if c.after_run])
    states = ledger.load(Path(app.srcdir))
    moved = ledger.net_effect(states)
    head = nodes.paragraph(classes=["icl-net-effect"])
    head += nodes.strong(text="Net effect.  ")
    head += nodes.Text(
        f"The {sum(c.after_run for c in CHANGES)} changes made after a run moved {after['toward PASS']} recorded "
        f"verdicts toward PASS and {after['toward FAIL']} toward FAIL.  Between the {len(states)} committed states "
        f"of the paper profile's records, {moved['toward PASS']} verdicts moved toward PASS and "
        f"{moved['toward FAIL']} toward FAIL (a claim removed counts by the verdict it had); every such move is "
        "listed below with the change that made it (a test holds the records' ledger to this page).")
    rows = []
    for c in sorted(CHANGES, key=lambda c: (c.chapter, c.claims, c.date)):
        target = nodes.inline(ids=[f"rule-{c.chapter}-{cid}" for cid in c.claims])
        chapter = link(app, fromdoc, docs[c.chapter], c.chapter) if c.chapter in docs else c.chapter
        net = c.net
        rows.append([
            [target, *[part for cid in c.claims for part in (nodes.literal(text=cid), nodes.Text(" "))]],
            chapter,
            c.date,
            nodes.literal(text=c.before),
            nodes.literal(text=c.after),
            c.why + (f" (corrected {c.corrected})" if c.corrected else ""),
            "yes" if c.after_run else "no",
            _verdict_changes(c.verdicts),
            ", ".join(f"{n} {k}" for k, n in net.items() if n) or "-",
        ])
    headers = ["Claim", "Chapter", "Date", "Rule before", "Rule after", "Why", "After a run", "Verdict before → after",
               "Net effect"]
    return [head, scroll(table(headers, rows, ["icl-claims", "icl-rules"]))]


def _store_summary(app: Sphinx) -> dict[str, str]:
    """Per chapter, what the committed run store holds of its paper-profile runs (trained once on a
    GPU): ``"24 of 24 runs stored, trained on cuda (...), <date>"`` or ``"0 of 24 runs stored"``;
    nothing for a book built outside a checkout (no ``book/`` beside its configuration)."""
    if not hasattr(app, "icl_store_summary"):
        from icl_lib.book import plan
        from icl_lib.book.plan_training import store_summary

        book = Path(app.srcdir) / "book"
        if not book.exists():  # a book built outside a checkout has no run store of its own
            app.icl_store_summary = {}
            return app.icl_store_summary
        try:
            app.icl_store_summary = store_summary(plan.book_plan("paper", book))
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
