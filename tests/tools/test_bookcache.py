"""A book build never shows the outputs of older code: the execution cache is emptied when icl_lib
changed since it was filled, and a chapter page is read again when its execution is newer."""

import io
import textwrap
from pathlib import Path

import nbformat
import pytest

from icl_lib.book import execution_cache as bookcache, execute as bookexec



def _reading_notebook(path: Path, source: Path) -> str:
    """A chapter whose output is the text of ``source`` (standing for what the library computes)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# Chapter"), nbformat.v4.new_code_cell(f"print(open({str(source)!r}).read())")]
    nbformat.write(nb, path)
    return str(path)


def _printed(cache_path: Path, nb_path: str) -> str:
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    rec = cache.match_cache_notebook(nbformat.read(nb_path, as_version=4))
    cells = [c for c in cache.get_cache_bundle(rec.pk).nb.cells if c.cell_type == "code"]
    return cells[0].outputs[0]["text"].strip()


def test_fingerprint_follows_every_source_file(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.py").write_text("X = 1\n")
    first = bookcache.execution_fingerprint([lib])
    assert bookcache.execution_fingerprint([lib]) == first
    (lib / "a.py").write_text("X = 2\n")
    second = bookcache.execution_fingerprint([lib])
    (lib / "sub").mkdir()
    (lib / "sub" / "b.py").write_text("")
    assert len({first, second, bookcache.execution_fingerprint([lib])}) == 3
    assert bookcache.execution_fingerprint() == bookcache.execution_fingerprint()  # icl_lib itself


def test_fingerprint_follows_the_profile_settings_and_the_run_store(tmp_path, monkeypatch):
    """A chapter executed in the quick profile was served to `ICL_PROFILE=paper make book` (the
    cache matched it by its code cells); so was one executed before runs were stored."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.py").write_text("X = 1\n")
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    for name in bookcache.PROFILE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    seen = [bookcache.execution_fingerprint([lib])]
    monkeypatch.setenv("ICL_PROFILE", "paper")
    seen.append(bookcache.execution_fingerprint([lib]))
    monkeypatch.setenv("ICL_BOOK_PROFILE", "stored")
    seen.append(bookcache.execution_fingerprint([lib]))
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "manifest.json").write_text("[]\n")
    seen.append(bookcache.execution_fingerprint([lib]))
    (tmp_path / "store" / "manifest.json").write_text('[{"key": "a run"}]\n')
    seen.append(bookcache.execution_fingerprint([lib]))
    assert len(set(seen)) == 5
    assert bookcache.execution_fingerprint([lib]) == seen[-1]
    assert bookcache.execution_settings()["ICL_PROFILE"] == "paper"


def test_bookexec_executes_every_chapter_again_when_the_library_changed(tmp_path, capsys):
    """The previous code printed "every chapter is cached" and kept the old output."""
    value = tmp_path / "value.txt"
    value.write_text("value-one")
    nb = _reading_notebook(tmp_path / "ch.ipynb", value)
    cache = tmp_path / "cache"
    assert bookexec.execute_chapters([nb], cache, jobs=1, timeout=120, fingerprint="code-A") == 0
    assert _printed(cache, nb) == "value-one"
    value.write_text("value-two")  # the library changes ...
    assert bookexec.execute_chapters([nb], cache, jobs=1, timeout=120, fingerprint="code-B") == 0
    out = capsys.readouterr().out
    assert "executing every chapter again" in out and "every chapter is cached" not in out
    assert _printed(cache, nb) == "value-two"
    assert bookexec.execute_chapters([nb], cache, jobs=1, timeout=120, fingerprint="code-B") == 0
    assert "every chapter is cached" in capsys.readouterr().out


def _build(src: Path, out: Path, cache: Path) -> str:
    from sphinx.application import Sphinx

    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(out / "html"), str(out / "doctrees"), "html", status=None,
                 warning=warnings, freshenv=False)
    app.build()
    assert "ERROR" not in warnings.getvalue(), warnings.getvalue()
    return (out / "html" / "ch.html").read_text()


def test_the_build_never_renders_an_old_execution(tmp_path, monkeypatch):
    """Two ways a page went stale before: icl_lib changed (the cache matched the code cells only)
    and the pre-execution re-ran a chapter (Sphinx kept the page read from the old execution)."""
    value = tmp_path / "value.txt"
    src, out, cache = tmp_path / "src", tmp_path / "out", tmp_path / "cache"
    src.mkdir()
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        extensions = ["myst_nb", "icl_lib.book.sphinx"]
        nb_execution_mode = "cache"
        nb_execution_cache_path = {str(cache)!r}
        mathjax_path = "https://example.invalid/mathjax.js"
        suppress_warnings = ["mystnb.unknown_mime_type"]
        """))
    (src / "index.md").write_text("# Book\n\n```{toctree}\nch\n```\n")
    nb = _reading_notebook(src / "ch.ipynb", value)
    fingerprint = {"now": "code-A"}
    monkeypatch.setattr(bookcache, "execution_fingerprint", lambda sources=None: fingerprint["now"])

    value.write_text("value-one")
    assert "value-one" in _build(src, out, cache)
    value.write_text("value-two")
    fingerprint["now"] = "code-B"  # icl_lib changed: the build itself executes the chapter again
    page = _build(src, out, cache)
    assert "value-two" in page and "value-one" not in page
    value.write_text("value-three")
    fingerprint["now"] = "code-C"  # ... and now make book's pre-execution runs it first
    assert bookexec.execute_chapters([nb], cache, jobs=1, timeout=120) == 0
    page = _build(src, out, cache)
    assert "value-three" in page and "value-two" not in page
    assert "value-three" in _build(src, out, cache)  # nothing changed: the page is kept


@pytest.mark.parametrize("payload", ["", "{}", "not json", '{"fingerprint": "other"}'])
def test_a_cache_without_a_matching_fingerprint_is_emptied(tmp_path, payload):
    cache = tmp_path / "cache"
    nb = _reading_notebook(tmp_path / "ch.ipynb", tmp_path / "v.txt")
    (tmp_path / "v.txt").write_text("x")
    bookexec.execute_chapters([nb], cache, jobs=1, timeout=120, fingerprint="mine")
    (cache / bookcache.FINGERPRINT_FILE).write_text(payload)
    assert bookcache.clear_if_stale(cache, "mine") is True
    assert bookcache.clear_if_stale(cache, "mine") is False
