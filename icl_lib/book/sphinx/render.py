"""The nodes every page of the book's extension builds: tables, links, verdicts (:mod:`icl_lib.book.sphinx`)."""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

__all__ = ["table", "link", "verdict", "scroll", "count_text", "VERDICT_CLASS"]


def table(headers: list[str], rows: list[list[nodes.Node | str]], classes: list[str]) -> nodes.table:
    table = nodes.table(classes=["colwidths-auto", *classes])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for h in headers:
        row += nodes.entry("", nodes.paragraph(text=h))
    head += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            for part in cell if isinstance(cell, list) else [cell]:
                para = nodes.paragraph()
                para += nodes.Text(part) if isinstance(part, str) else part
                entry += para
            row += entry
        body += row
    return table


def link(app: Sphinx, fromdoc: str, todoc: str, text: str, anchor: str = "", literal=False) -> nodes.Node:
    uri = app.builder.get_relative_uri(fromdoc, todoc) + (f"#{anchor}" if anchor else "")
    ref = nodes.reference("", "", internal=True, refuri=uri)
    ref += nodes.literal(text=text) if literal else nodes.Text(text)
    return ref


VERDICT_CLASS = {"PASS": "icl-pass", "FAIL": "icl-fail", "INCONCLUSIVE": "icl-inconclusive", "NOT-RUN": "icl-notrun"}


def verdict(verdict: str) -> nodes.Node:
    text = "not run in this profile" if verdict == "NOT-RUN" else verdict
    return nodes.inline(text=text, classes=["icl-verdict", VERDICT_CLASS.get(verdict, "icl-fail")])


def count_text(claims: list[dict]) -> str:
    """``"12 pass, 1 fail, 2 inconclusive, 1 not run in this profile; 2 reported by their chapter as
    not reproducing"`` (every verdict, never hidden)."""
    n = {v: sum(c["verdict"] == v for c in claims) for v in VERDICT_CLASS}
    known = sum(bool(c.get("known_failure")) for c in claims)
    text = (f"{n['PASS']} pass, {n['FAIL']} fail, {n['INCONCLUSIVE']} inconclusive, "
            f"{n['NOT-RUN']} not run in this profile")
    if known:
        text += f"; {known} reported by {'their chapter' if known > 1 else 'its chapter'} as not reproducing"
    return text


def scroll(table: nodes.Node) -> nodes.Node:
    """A wide table in a box that scrolls sideways inside the page's column (marked by its border)."""
    box = nodes.container(classes=["icl-scroll"])
    box += table
    return box
