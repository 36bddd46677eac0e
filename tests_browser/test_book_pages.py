"""The built book as a reader sees it: every page of the table of contents in headless Chromium.

Run after ``make book`` (``make browser-test``).  For each page: MathJax (served by the book
itself) typeset every equation and left no raw TeX, every image loads, every figure is numbered
and captioned, no Python traceback shows, no script fails, and the page asked for nothing but
local files -- the book works without a network.  The claims dashboard must list every ``CLAIM``
line that the chapter pages print.

BOOK_HTML (default ``_build/html``) names the built book; BOOK_SCREENSHOTS, a folder to save a
PNG of each page in.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from chromium import Chromium


# a claim line's id and verdict (its expected value may hold spaces: a rival's name)
CLAIM_ID = re.compile(r"^(?:CLAIM|CHECK) (\S+) (PASS|FAIL|INCONCLUSIVE|NOT-RUN) measured=", re.M)
ROOT = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html")).resolve()
SHOTS = Path(os.environ["BOOK_SCREENSHOTS"]).resolve() if os.environ.get("BOOK_SCREENSHOTS") else None


def toc_files() -> list[str]:
    """Every document of _toc.yml, in order (``book/intro``, ``book/01_setup``, ...)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                out.append(e["file"])
            for key in ("parts", "chapters", "sections"):
                walk(e.get(key))

    walk(toc.get("parts", []) + toc.get("chapters", []))
    return [str(Path(f).with_suffix("")) for f in out]


def is_chapter(doc: str) -> bool:
    return (ROOT / f"{doc}.ipynb").exists()


PAGES = toc_files()
CHAPTERS = [d for d in PAGES if is_chapter(d)]

# Runs in the page once it has loaded; resolves to a JSON report.
CHECK_JS = r"""
(async () => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const math = Array.from(document.querySelectorAll('.math'));
  let mathjax = null;
  if (math.length) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) await sleep(100);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      await MathJax.startup.promise;
      mathjax = MathJax.version;
    }
  }
  const untypeset = math.filter((e) => !e.querySelector('mjx-container')).map((e) => e.textContent.slice(0, 80));
  const texErrors = Array.from(document.querySelectorAll('mjx-merror')).map((e) => e.textContent.slice(0, 80));
  const article = (document.querySelector('article') || document.body).cloneNode(true);
  article.querySelectorAll('pre, code, script, style, textarea, mjx-container').forEach((e) => e.remove());
  const text = article.textContent;
  const rawTex = ['$$', '\\[', '\\(', '\\begin{'].filter((s) => text.includes(s));
  const images = await Promise.all(Array.from(document.images).map(async (img) => {
    const probe = new Image();
    probe.src = img.currentSrc || img.src;
    try { await probe.decode(); } catch (e) { return {src: img.src, ok: false}; }
    return {src: img.src, ok: probe.naturalWidth > 0 && probe.naturalHeight > 0};
  }));
  const figures = Array.from(document.querySelectorAll('article figure')).map((f) => ({
    id: f.id,
    images: f.querySelectorAll('img').length,
    number: (f.querySelector('.caption-number') || {}).textContent || '',
    caption: ((f.querySelector('figcaption') || {}).textContent || '').trim(),
  }));
  const body = document.body.innerText;
  return JSON.stringify({
    title: document.title, mathCount: math.length, mathjax, mjx: document.querySelectorAll('mjx-container').length,
    untypeset, texErrors, rawTex, images, figures,
    tracebackNodes: document.querySelectorAll('.traceback').length,
    tracebackText: /Traceback \(most recent call last\)|Error\s+Traceback/.test(body),
    ids: Array.from(document.querySelectorAll('[id]')).map((e) => e.id),
    streams: Array.from(document.querySelectorAll('.cell_output .output.stream')).map((e) => e.innerText).join('\n'),
    links: Array.from(document.querySelectorAll('article a.reference.internal')).map((a) => a.getAttribute('href')),
    claimRows: Array.from(document.querySelectorAll('table.icl-claims:not(.icl-rules) tbody tr')).map((tr) => {
      const cells = Array.from(tr.children).map((td) => td.innerText.trim());
      const a = tr.querySelector('a');
      return {cid: a ? a.innerText.trim() : '', verdict: tr.querySelector('.icl-verdict').innerText.trim(),
              href: a ? a.getAttribute('href') : ''};
    }),
    statusRows: Array.from(document.querySelectorAll('table.icl-status tbody tr')).map(
      (tr) => Array.from(tr.children).map((td) => td.innerText.trim())),
    // code and printed output wider than the page's column (a reader would scroll sideways)
    overflowing: Array.from(document.querySelectorAll('div.cell_input pre, div.cell_output pre'))
      .filter((e) => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
      .map((e) => e.innerText.split('\n').reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 100)),
    // the code cells a reader sees (hidden and removed inputs are not in this list)
    shownCode: Array.from(document.querySelectorAll('div.cell_input'))
      .filter((e) => e.offsetParent !== null && !e.closest('details'))
      .map((e) => e.innerText),
    // wide tables: wider than the column or than the output or box that holds them (a reader
    // would scroll sideways); each as its class and the start of its header
    wideTables: Array.from(document.querySelectorAll('article table'))
      .filter((t) => {
        const box = t.closest('.icl-scroll, .cell_output') || t.parentElement;
        const room = Math.min((document.querySelector('article') || document.body).clientWidth, box.clientWidth);
        return t.offsetParent !== null && Math.max(t.scrollWidth, t.getBoundingClientRect().width) > room + 1;
      })
      .map((t) => `${t.className}: ${(t.querySelector('tr') || t).innerText.replace(/\s+/g, ' ').slice(0, 60)}`),
  });
})()
"""


@pytest.fixture(scope="session")
def browser():
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built book in {HTML}: run `make book` first")
    chromium = Chromium()
    yield chromium
    chromium.close()


_visits: dict[str, object] = {}


@pytest.fixture
def visit(browser):
    """Open a page of the book (once per session) and return what the browser saw."""

    def _open(doc: str):
        if doc not in _visits:
            page = HTML / f"{doc}.html"
            assert page.exists(), f"{doc} is in _toc.yml but {page} was not built"
            shot = SHOTS / f"{doc.replace('/', '_')}.png" if SHOTS else None
            _visits[doc] = browser.open(page.as_uri(), CHECK_JS, screenshot=shot)
        return _visits[doc]

    return _open


def test_every_chapter_notebook_is_in_the_book():
    notebooks = sorted(str(p.relative_to(ROOT).with_suffix("")) for p in (ROOT / "book").glob("*.ipynb"))
    assert notebooks, "no chapter notebooks in book/"
    missing = [nb for nb in notebooks if nb not in PAGES]
    assert not missing, f"chapters missing from _toc.yml: {missing}"


@pytest.mark.parametrize("doc", PAGES)
def test_page_reads_offline(visit, doc):
    v = visit(doc)
    r = v.result
    local = [u for u in v.requests if urlsplit(u).scheme not in ("file", "data", "blob", "about")]
    assert not local, f"{doc} asked the network for {local}"
    assert not v.failed, f"{doc}: requests failed: {v.failed}"
    assert not v.exceptions, f"{doc}: JavaScript exceptions: {v.exceptions}"
    # maths: typeset by the local MathJax, nothing left raw, no TeX errors
    if r["mathCount"]:
        assert r["mathjax"] and r["mathjax"].startswith("3."), f"{doc}: MathJax 3 did not run ({r['mathjax']})"
        assert r["mjx"] >= r["mathCount"]
    assert not r["untypeset"], f"{doc}: equations left untypeset: {r['untypeset']}"
    assert not r["texErrors"], f"{doc}: TeX errors: {r['texErrors']}"
    assert not r["rawTex"], f"{doc}: raw TeX delimiters in the text: {r['rawTex']}"
    # figures: every image loads; every figure has its image, a number and a caption
    broken = [i["src"] for i in r["images"] if not i["ok"]]
    assert not broken, f"{doc}: images that do not load: {broken}"
    for f in r["figures"]:
        assert f["images"] >= 1 and f["number"].strip() and f["caption"], f"{doc}: incomplete figure {f}"
    # no Python traceback anywhere on the page
    assert not r["tracebackNodes"] and not r["tracebackText"], f"{doc} shows a Python traceback"
    # internal links point at pages and anchors that exist
    for href in r["links"]:
        path, _, anchor = href.partition("#")
        target = (HTML / doc).parent / path if path else HTML / f"{doc}.html"
        assert target.resolve().exists(), f"{doc}: link to a missing page {href}"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapter_has_typeset_maths_and_numbered_figures(visit, doc):
    r = visit(doc).result
    assert r["mathCount"] > 0 and r["mjx"] > 0, f"{doc}: no typeset equation"
    assert r["figures"], f"{doc}: no figure"
    for f in r["figures"]:
        assert re.match(r"Fig\. \d+(\.\d+)*", f["number"].strip()), f"{doc}: figure without a number {f}"


# A cell that only validates parameters, imports modules or glues numbers is plumbing: the book
# removes its input from the page (cell tags remove-input / hide-input; nbval still runs it).
PLUMBING = re.compile(r"^(import \S|from \S+ import |\w+ = check_\w+\(|icl\.resolve_profile\()", re.M)


@pytest.mark.parametrize("doc", PAGES)
def test_page_fits_a_1280_pixel_window(visit, doc):
    r = visit(doc).result
    assert not r["overflowing"], f"{doc}: code or output wider than the column: {r['overflowing'][:3]}"
    assert not r["wideTables"], f"{doc}: tables wider than the column at 1,280 pixels: {r['wideTables']}"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapter_shows_no_validation_or_import_cell(visit, doc):
    shown = visit(doc).result["shownCode"]
    plumbing = [c.splitlines()[0] for c in shown if PLUMBING.search(c)]
    assert not plumbing, f"{doc} shows plumbing cells (validation, imports): {plumbing}"


def shown_claims(visit, doc: str) -> list[tuple[str, str]]:
    """The CLAIM (and CHECK) lines that the chapter's page prints (its last cell's output)."""
    return CLAIM_ID.findall(visit(doc).result["streams"])


def test_dashboard_lists_every_claim_of_every_chapter(visit):
    dash = "book/claims"
    assert dash in PAGES
    rows = visit(dash).result["claimRows"]
    expected = [(doc, cid, verdict) for doc in CHAPTERS for cid, verdict in shown_claims(visit, doc)]
    assert expected, "no CLAIM line on any chapter page"
    shown = []
    for row in rows:
        page, _, anchor = row["href"].partition("#")
        doc = str((Path(dash).parent / page).with_suffix(""))
        verdict = {"not run in this profile": "NOT-RUN"}.get(row["verdict"], row["verdict"])
        shown.append((doc, row["cid"], verdict))
        # the link lands on the section of the chapter that checks the claim
        assert anchor and anchor in visit(doc).result["ids"], f"claim {row['cid']} links to a missing section"
    # every line once, in the chapters' order (within a chapter the dashboard groups the papers'
    # claims, the book's own and its checks)
    assert sorted(shown) == sorted(expected) and len(shown) == len(expected)
    assert [d for d, *_ in shown] == sorted((d for d, *_ in shown), key=CHAPTERS.index)


def test_status_page_has_a_row_per_chapter(visit):
    rows = visit("book/status").result["statusRows"]
    assert len(rows) == len(CHAPTERS)
    for row in rows:
        chapter, executed, runtime, status, profile, device, lib, torch_version, claims, stored = row
        assert stored.startswith("trains nothing") or re.match(r"\d+ of \d+ runs stored", stored), row
        assert status == "succeeded" and profile in ("quick", "paper") and device and lib != "-" and torch_version != "-"
        assert re.fullmatch(r"\d+(\.\d+)?", runtime), row
