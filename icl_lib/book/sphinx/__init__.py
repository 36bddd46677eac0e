"""Sphinx extension of the book: the claims dashboard and the execution-status page.

Every chapter ends with ``claims.report()`` (``icl_lib.claims``), which prints one line per checked
claim of the papers,

    CLAIM <id> PASS|FAIL measured=<value> expected=<condition>

and records the same claims as JSON in a glue record (key :data:`CLAIMS_GLUE_KEY`, media type
:data:`CLAIMS_MIME`: the paper's statement, the profile, the device, the library versions and the
cell that checked each claim).  While the book builds, this extension reads the lines from each
chapter's page as soon as the chapter has been read (executed, or served from the execution cache)
and the JSON from the chapter's glue data, links every claim to the section of the chapter that
checks it, and fills these placeholders once all documents are read (the pages themselves are
built by :mod:`~icl_lib.book.sphinx.pages`):

* ``{claims-headline}``   -- the dashboard's opening: per paper, what reproduces, what does not and by
  how much, what is undecided, which verdicts another declared definition would change, and the
  sentences not tested;
* ``{claims-dashboard}``  -- every claim of every chapter, with its verdict, and beside it the verdict
  of the other profile (``quick`` or ``paper``) where a run of that profile recorded its claims
  (``claims.report()`` with ``ICL_CLAIMS_DIR``: ``<icl_claims_dir>/<profile>/<chapter>.json``;
  ``make test`` records its ``nbval`` run's, ``make book`` its own);
* ``{execution-status}``  -- per chapter: when and how long it ran, profile, device, versions;
* ``{rule-changes}``      -- every change to a claim's rule after it was first written, from
  :data:`icl_lib.rule_changes.CHANGES`.

Two roles let a chapter's prose state a claim from its declaration instead of beside it:
``{verdict}`cid``` is the claim's verdict in this build, ``{rule}`cid``` its declared rule (the
rule as the ``CLAIM`` line prints it, on its declared population).

The dashboard's headline counts the papers' claims only; the book's own claims beyond the papers
and its checks of its derivations and design (:data:`icl_lib.claims.KINDS`) are counted and listed
apart.

So both pages always describe the build they are part of; no list of chapters is kept anywhere.
Chapters are found as the notebooks of the table of contents, in its order.

It keeps the pages the record of this code's executions: with ``execute_notebooks: cache`` it
empties the execution cache when ``icl_lib`` changed since the cache was filled, and re-reads a
chapter page whose notebook has a newer execution, or none (:mod:`icl_lib.book.execution_cache`).
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
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from icl_lib.claims import CLAIM_LINE as _PRINTED, CLAIMS_GLUE_KEY, CLAIMS_MIME
from .. import execution_cache as bookcache

from .sections import definitions_table, words_table
from .render import VERDICT_CLASS
from .pages import _dashboard, _headline, _rule_changes, _state, _status

# The claim lines as the chapters print them (icl_lib.claims.CLAIM_LINE), whose ``expected`` may
# hold spaces: a rule that excludes a named rival prints it as written ("excludes(first order=1)")
PRINTED_CLAIM_LINE = re.compile(_PRINTED.pattern.replace(r"expected=(\S*) ", r"expected=(.*?) "), re.M)
assert PRINTED_CLAIM_LINE.pattern != _PRINTED.pattern

logger = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------
# Placeholders


class claims_dashboard(nodes.General, nodes.Element):
    """Replaced by the claims tables once every chapter has been read."""


class claims_headline(nodes.General, nodes.Element):
    """Replaced by the dashboard's headline once every chapter has been read."""


class execution_status(nodes.General, nodes.Element):
    """Replaced by the execution-status table once every chapter has been read."""


class rule_changes(nodes.General, nodes.Element):
    """Replaced by the table of rule changes (it needs the builder, to link the chapters)."""


class words_rules(nodes.General, nodes.Element):
    """Replaced by the table from the papers' words to the book's rules."""


class definitions(nodes.General, nodes.Element):
    """Replaced by the table of the definitions the verdicts rest on."""


class pending_claim(nodes.Inline, nodes.Element):
    """A claim's verdict or rule in a chapter's prose (``{verdict}`cid```, ``{rule}`cid```), filled
    from the chapter's claims once they are known."""


def _claim_role(what: str):
    def role(name, rawtext, text, lineno, inliner, options=None, content=None):
        return [pending_claim(rawtext, cid=text.strip(), what=what)], []

    return role


class _Placeholder(SphinxDirective):
    node_class: type[nodes.Element]
    has_content = False

    def run(self):
        _state(self.env)["pages"].add(self.env.docname)
        return [self.node_class()]


class ClaimsDashboard(_Placeholder):
    node_class = claims_dashboard


class ClaimsHeadline(_Placeholder):
    node_class = claims_headline


class ExecutionStatus(_Placeholder):
    node_class = execution_status


class WordsRules(_Placeholder):
    node_class = words_rules


class Definitions(_Placeholder):
    node_class = definitions


class RuleChanges(_Placeholder):
    node_class = rule_changes

    def run(self):
        _state(self.env)["rule_page"] = self.env.docname  # the dashboard links its claims here
        return super().run()


# --------------------------------------------------------------------------------------------
# What the build environment keeps (pickled between builds, so cached chapters keep their data)


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
                lines += PRINTED_CLAIM_LINE.findall(block.astext())
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
                **{k: d.get(k, "") for k in ("margin", "whole", "design")},
                "alternatives": d.get("alternatives") or {},
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


def _claim_text(app: Sphinx, node: pending_claim, fromdoc: str) -> nodes.Node:
    """The verdict or rule of the claim a ``{verdict}``/``{rule}`` role names, from this chapter's
    claims in the build (a claim it did not decide: a warning, and the text says so)."""
    claims = _state(app.env)["chapters"].get(fromdoc, {}).get("claims", [])
    c = next((c for c in claims if c["cid"] == node["cid"]), None)
    if c is None:
        logger.warning(f"{{{node['what']}}} names {node['cid']!r}, which this chapter did not decide",
                       location=fromdoc, type="icl", subtype="claims")
        return nodes.emphasis(text=f"({node['cid']}: not decided in this build)")
    if node["what"] == "verdict":
        return nodes.strong(text=c["verdict"], classes=["icl-prose-verdict", VERDICT_CLASS.get(c["verdict"], "")])
    out = nodes.inline(classes=["icl-prose-rule"])
    out += nodes.literal(text=c["expected"])
    if c.get("population"):
        out += nodes.Text(f" (on {c['population'].split(';')[0]})")
    return out


def _fill(app: Sphinx, doctree: nodes.document, fromdoc: str) -> None:
    for node in list(doctree.findall(pending_claim)):
        node.replace_self(_claim_text(app, node, fromdoc))
    for node in list(doctree.findall(claims_headline)):
        node.replace_self(_headline(app, fromdoc))
    for node in list(doctree.findall(claims_dashboard)):
        node.replace_self(_dashboard(app, fromdoc))
    for node in list(doctree.findall(execution_status)):
        node.replace_self(_status(app, fromdoc))
    for node in list(doctree.findall(rule_changes)):
        node.replace_self(_rule_changes(app, fromdoc))
    for node in list(doctree.findall(words_rules)):
        node.replace_self(words_table())
    for node in list(doctree.findall(definitions)):
        node.replace_self(definitions_table())


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
    app.add_directive("claims-headline", ClaimsHeadline)
    app.add_directive("execution-status", ExecutionStatus)
    app.add_directive("rule-changes", RuleChanges)
    app.add_directive("words-to-rules", WordsRules)
    app.add_directive("definitions", Definitions)
    app.add_role("verdict", _claim_role("verdict"))
    app.add_role("rule", _claim_role("rule"))
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
