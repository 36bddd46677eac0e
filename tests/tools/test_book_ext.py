"""The book's Sphinx extension (icl_lib/book/sphinx) on a small book built here with Sphinx.

Two chapter notebooks carry the outputs that ``Claims.report()`` makes (the CLAIM lines and the
glued JSON), written by the real ``Claims`` class; the dashboard must list every claim of every
chapter of the table of contents, in its order, linked to the section that checked it, and warn
when a chapter's lines and JSON disagree.  No kernel runs (execution is off).
"""

from __future__ import annotations

import importlib.util
import io
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

from icl_lib import claims as claims_mod
from tests.declaring import Declaring
from icl_lib.claims import Above, Claims, Excludes, Within
from icl_lib.stats import Estimate

ROOT = Path(__file__).resolve().parents[2]


def _ext():
    return importlib.import_module("icl_lib.book.sphinx")


def test_extension_reads_what_claims_writes():
    ext = _ext()
    assert ext.CLAIMS_MIME == claims_mod.CLAIMS_MIME and ext.CLAIMS_GLUE_KEY == claims_mod.CLAIMS_GLUE_KEY
    c = Declaring("t", "quick")
    c.check("a-b", True, 0.123456, "|x - 1| < 4 se", "s")
    c.check("c", False, [1.0, float("nan")], "y>3", "s")
    c.test("d", Estimate(0.5, 0.2, 0.9), Above(0.4), "s", "P1 §3")
    c.test("e", Estimate(0.5, 0.2, 0.9), Above(0.4), "s", profiles="paper")
    lines = "\n".join(x.line() for x in c.items) + "\n"
    assert ext.PRINTED_CLAIM_LINE.findall(lines) == [
        ("a-b", "PASS", "0.1235", "-", "|x-1|<4se", "quick,paper"),
        ("c", "FAIL", "[1,nan]", "-", "y>3", "quick,paper"),
        ("d", "INCONCLUSIVE", "0.5", "[0.2,0.9]", ">0.4", "quick,paper"),
        ("e", "NOT-RUN", "-", "-", ">0.4", "paper"),
    ]
    # a rule that excludes a named rival prints the name with its spaces joined, one token of the line
    c.test("f", Estimate(2.0, 1.6, 2.2), Within(1.5, 2.5) & Excludes(1, "first order"), "s")
    assert ext.PRINTED_CLAIM_LINE.findall(c.items[-1].line() + "\n") == [
        ("f", "PASS", "2", "[1.6,2.2]", "in[1.5,2.5]&excludes(first-order=1)", "quick,paper")]


def _chapter(title: str, checks: list[tuple[str, str, object]], tamper: bool = False) -> nbformat.NotebookNode:
    """A chapter notebook: one section per claim, whose cell has the outputs report() makes.
    A check's outcome is True/False (a plain check), "KNOWN-FAIL", "INCONCLUSIVE" or "NOT-RUN"."""
    c = Declaring("x", "quick", device="cpu")
    cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nIntro.")]
    for n, (section, cid, ok) in enumerate(checks, start=1):
        cells.append(nbformat.v4.new_markdown_cell(f"## {section}\n\nText."))
        cells.append(nbformat.v4.new_code_cell(f"claims.check({cid!r}, ...)", execution_count=n))
        if ok in (True, False):
            c.check(cid, ok, 0.5 * n, "x<1", f"statement of {cid}")
        elif ok == "KNOWN-FAIL":  # a failure the chapter reports as a non-reproduction
            c.check(cid, False, 0.5 * n, "x<1", f"statement of {cid}", known_failure=f"{cid} fails at d = 4")
        else:
            c.test(cid, Estimate(0.5, 0.2, 0.9), Above(0.4), f"statement of {cid}", "P1 §3",
                   profiles="paper" if ok == "NOT-RUN" else ("quick", "paper"))
        c.items[-1].cell = n  # what the kernel's execution count would have been
    payload = c.payload()
    text = "".join(x.line() + "\n" for x in c.items)
    if tamper:
        text = text.replace("PASS", "FAIL", 1)
    report = nbformat.v4.new_code_cell("claims.report()", execution_count=len(checks) + 1)
    prefix = "application/papermill.record/"
    report.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=text),
        nbformat.v4.new_output(
            "display_data",
            data={prefix + claims_mod.CLAIMS_MIME: payload},
            metadata={"scrapbook": {"name": claims_mod.CLAIMS_GLUE_KEY, "mime_prefix": prefix}},
        ),
    ]
    cells += [nbformat.v4.new_markdown_cell("## Verdict"), report]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    return nb


def _build(tmp_path: Path, chapters: dict[str, nbformat.NotebookNode]) -> tuple[str, str, str]:
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "conf.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            extensions = ["myst_nb", "icl_lib.book.sphinx"]
            nb_execution_mode = "off"
            mathjax_path = "https://example.invalid/mathjax.js"  # not loaded: nothing opens the pages
            suppress_warnings = ["mystnb.unknown_mime_type"]
            """
        )
    )
    toc = "\n".join(chapters)
    (src / "index.md").write_text(f"# Book\n\n```{{toctree}}\nclaims\nstatus\n{toc}\n```\n")
    (src / "claims.md").write_text("# Claims\n\n```{claims-dashboard}\n```\n")
    (src / "status.md").write_text("# Status\n\n```{execution-status}\n```\n")
    for name, nb in chapters.items():
        if nb is not None:  # None: a page the test wrote itself
            nbformat.write(nb, src / f"{name}.ipynb")
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / "html"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=warnings, freshenv=True)
    app.build()
    html = tmp_path / "html"
    return (html / "claims.html").read_text(), (html / "status.html").read_text(), warnings.getvalue()


def _rows(page: str) -> list[tuple[str, str, str]]:
    """(href, claim id, verdict) of each dashboard row."""
    return re.findall(
        r'<tr[^>]*>\s*<td><p><a class="reference internal" href="([^"]*)"><code[^>]*>(?:<span[^>]*>)?([^<]+)'
        r".*?icl-verdict icl-(?:pass|fail|inconclusive|notrun)\">(PASS|FAIL|INCONCLUSIVE|not run in this profile)<",
        page,
        flags=re.S,
    )


def test_dashboard_lists_every_claim_of_every_chapter(tmp_path):
    chapters = {
        "02_second": _chapter("2. Second", [("Alpha part", "alpha", True), ("Beta part", "beta", False),
                                            ("Gamma part", "gamma", "INCONCLUSIVE"), ("Delta part", "delta", "NOT-RUN")]),
        "01_first": _chapter("1. First", [("The data", "moment", True)]),
    }
    dash, status, warnings = _build(tmp_path, chapters)
    assert "WARNING" not in warnings, warnings
    # in the order of the table of contents, each linked to its section
    assert _rows(dash) == [
        ("02_second.html#alpha-part", "alpha", "PASS"),
        ("02_second.html#beta-part", "beta", "FAIL"),
        ("02_second.html#gamma-part", "gamma", "INCONCLUSIVE"),
        ("02_second.html#delta-part", "delta", "not run in this profile"),
        ("01_first.html#the-data", "moment", "PASS"),
    ]
    assert "statement of beta" in dash and "[0.2,0.9]" in dash and "P1 §3" in dash
    assert "checks 5 claims of the two papers in 2 chapters: 2 pass, 1 fail, 1 inconclusive, 1 not run" in dash
    assert status.count("<tr") == 1 + 2  # header and one row per chapter
    assert ">quick<" in status and ">cpu<" in status
    assert ">1 pass, 1 fail, 1 inconclusive, 1 not run in this profile<" in status


def test_dashboard_counts_the_papers_claims_apart_from_the_books_own_and_its_checks(tmp_path, monkeypatch):
    """The headline counts the papers' claims only; beyond-the-paper claims and checks of the book's
    derivations are listed and counted apart; an undecided claim shows what would decide it; a claim
    whose rule changed links to the rule-change page, which lists the change."""
    from icl_lib import rule_changes

    nb = _chapter("1. First", [("The data", "moment", True), ("Gamma part", "gamma", "INCONCLUSIVE")])
    c = Declaring("x", "quick", device="cpu")
    c.check("moment", True, 0.5, "x<1", "statement of moment", kind="check")
    c.test("gamma", Estimate(0.5, 0.2, 0.9, what="t interval of the mean"), Above(0.4), "statement of gamma",
           "P1 §3", n=8, unit="seeds",
           undecided="not trained: a test", known_failure="reported: a test")
    for item, n in zip(c.items, (1, 2)):
        item.cell = n
    report = nb.cells[-1]
    report.outputs[0]["text"] = "".join(x.line() + "\n" for x in c.items)
    report.outputs[1]["data"]["application/papermill.record/" + claims_mod.CLAIMS_MIME] = c.payload()
    monkeypatch.setattr(rule_changes, "CHANGES", (rule_changes.RuleChange(
        "01_first", ("gamma",), "2026-12-04", ">0.5", ">0.9", "the paper says consistently"),))
    src = tmp_path / "src"
    src.mkdir()
    (src / "rules.md").write_text("# Rules\n\n```{rule-changes}\n```\n")
    dash, _, warnings = _build(tmp_path, {"rules": None, "01_first": nb})
    ours = [w for w in warnings.splitlines() if "WARNING" in w and "already registered" not in w]  # a 2nd app
    assert not ours, warnings
    assert "checks 1 claim of the two papers in 1 chapter: 0 pass, 0 fail, 1 inconclusive" in dash
    assert "1 checks of the book's own derivations and design: 1 pass" in dash
    # the papers' reported claims are counted once, in the headline, not again beside the checks
    assert "not counted with them: 1 checks of the book's own derivations" in dash
    assert "Checks of the book's own derivations" in dash and "CHECK" not in dash
    assert "undecided: leans PASS" in dash and "seeds would decide it" in dash and "not trained: a test" in dash
    assert 'href="rules.html#rule-01_first-gamma"' in dash and "rule changed 2026-12-04" in dash
    rules = (tmp_path / "html" / "rules.html").read_text()
    assert 'id="rule-01_first-gamma"' in rules and "the paper says consistently" in rules
    assert "&gt;0.9" in rules and 'href="01_first.html"' in rules


def test_dashboard_shows_a_reported_non_reproduction_as_a_failure_with_its_report(tmp_path):
    chapters = {"01_first": _chapter("1. First", [("The data", "moment", True), ("Shape", "shape", "KNOWN-FAIL")])}
    dash, status, warnings = _build(tmp_path, chapters)
    ours = [w for w in warnings.splitlines() if "WARNING" in w and "already registered" not in w]  # a 2nd app
    assert not ours, warnings
    assert _rows(dash) == [("01_first.html#the-data", "moment", "PASS"), ("01_first.html#shape", "shape", "FAIL")]
    assert "reported not to reproduce: shape fails at d = 4" in dash
    assert "1 pass, 1 fail, 0 inconclusive, 0 not run in this profile; 1 reported by its chapter" in dash


def test_dashboard_warns_when_lines_and_json_disagree(tmp_path):
    chapters = {"01_first": _chapter("1. First", [("The data", "moment", True)], tamper=True)}
    _, _, warnings = _build(tmp_path, chapters)
    assert "the CLAIM line and the claims JSON output disagree" in warnings


def test_dashboard_warns_when_a_chapter_reports_nothing(tmp_path):
    nb = _chapter("1. First", [("The data", "moment", True)])
    nb.cells[-1].outputs = []
    _, _, warnings = _build(tmp_path, {"01_first": nb})
    assert "chapter printed no CLAIM line" in warnings


def test_config_serves_mathjax_from_the_book():
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    # a relative path is served from _static/ of the built book, which html_extra_path fills
    assert cfg["mathjax_path"] == "mathjax/tex-mml-chtml.js"
    assert "html_static_path" not in cfg and cfg["html_extra_path"] == ["_build/mathjax/html"]


def test_dashboard_shows_the_other_profiles_recorded_verdicts_beside_its_own(tmp_path, monkeypatch, capsys):
    """A run of the paper profile records its claims (Claims.report with ICL_CLAIMS_DIR); a quick
    build shows them beside its own, chapter by chapter, and says where none was recorded."""
    recorded = tmp_path / "src" / "_build" / "claims"
    monkeypatch.setenv("ICL_CLAIMS_DIR", str(recorded))
    paper = Declaring("01_first", "paper", device="cpu")
    paper.test("moment", Estimate(0.3, 0.1, 0.5), Above(0.4), "statement of moment", "P1 §3")
    paper.report()  # INCONCLUSIVE in the paper run: it does not raise
    capsys.readouterr()
    written = recorded / "paper" / "01_first.json"
    assert written.exists() and '"recorded"' in written.read_text()
    (recorded / "paper" / "bad.json").write_text("{not json")
    chapters = {"01_first": _chapter("1. First", [("The data", "moment", True), ("Shape", "shape", True)]),
                "02_second": _chapter("2. Second", [("Alpha part", "alpha", True)])}
    dash, _, warnings = _build(tmp_path, chapters)
    assert _rows(dash) == [("01_first.html#the-data", "moment", "PASS"), ("01_first.html#shape", "shape", "PASS"),
                           ("02_second.html#alpha-part", "alpha", "PASS")]  # this build's verdicts first
    assert "Verdict (paper below)" in dash
    other = re.findall(r'<span class="icl-other ([a-z-]+)">([^<]*)</span>', dash)
    assert other == [("icl-inconclusive", "paper: INCONCLUSIVE 0.3 [0.1,0.5]"),
                     ("icl-notrun", "paper: not in the recorded run"), ("icl-notrun", "paper: no recorded run")]
    assert "paper profile: recorded run of" in dash and "0 pass, 0 fail, 1 inconclusive" in dash
    assert "paper profile: no recorded run" in dash
    assert "recorded claims" in warnings and "bad.json left out" in warnings


@pytest.mark.slow
def test_dashboard_shows_a_current_committed_record_and_names_a_stale_one(tmp_path, monkeypatch):
    """A chapter no run of this build recorded in the other profile shows its committed record
    (icl_lib.book.records: chapter 8's paper run) while the record is current; a stale record is
    warned about and shown as stale, without its verdicts."""
    from icl_lib.book import records

    monkeypatch.setenv("ICL_CLAIMS_DIR", str(tmp_path / "nothing"))
    (tmp_path / "src" / "results" / "records" / "paper").mkdir(parents=True)
    paper = Declaring("02_second", "paper", device="cpu")
    paper.test("alpha", Estimate(0.3, 0.1, 0.5), Above(0.4), "statement of alpha", "P2 Thm 2")
    rec = dict(paper.payload(), recorded="2026-12-02 21:00 UTC", seconds=1800.0,
               command="python -m icl_lib record run 02")
    state = {"current": True, "changed": []}
    monkeypatch.setattr(records, "RECORDED", {"02_second": records.Recorded("paper", (), ())})
    monkeypatch.setattr(records, "status", lambda chapter, root=None: dict(state, record=rec))
    chapters = {"01_first": _chapter("1. First", [("The data", "moment", True)]),
                "02_second": _chapter("2. Second", [("Alpha part", "alpha", True)])}
    dash, status, warnings = _build(tmp_path, chapters)
    other = re.findall(r'<span class="icl-other ([a-z-]+)">([^<]*)</span>', dash)
    assert other == [("icl-notrun", "paper: no recorded run"), ("icl-inconclusive", "paper: INCONCLUSIVE 0.3 [0.1,0.5]")]
    assert ("paper profile: committed run of 2026-12-02 21:00 UTC on cpu" in dash and "30 min" in dash
            and "python -m icl_lib record run 02" in dash)
    assert "paper run recorded 2026-12-02 21:00 UTC on cpu (current)" in status
    state.update(current=False, changed=["icl_lib/paper2/loss.py"])
    dash, status, warnings = _build(tmp_path, chapters)  # a fresh environment: read again
    assert "paper: recorded run stale" in dash and "INCONCLUSIVE 0.3" not in dash
    assert "the committed run of 2026-12-02 21:00 UTC is stale (changed since: icl_lib/paper2/loss.py)" in dash
    assert "committed paper record of 02_second is stale" in warnings
    assert "(stale)" in status
