"""The parallel pre-execution of chapters fills the Jupyter Cache the book build reads."""

import nbformat
import pytest

from icl_lib.book import execute as bookexec


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return str(path)


def test_chapters_execute_side_by_side_into_the_cache(tmp_path, capsys):
    from jupyter_cache import get_cache

    good = _notebook(tmp_path / "a.ipynb", "import os", "print(os.environ['OMP_NUM_THREADS'], 6 * 7)")
    other = _notebook(tmp_path / "b.ipynb", "x = 1")
    bad = _notebook(tmp_path / "c.ipynb", "raise ValueError('claim failed')")
    cache_path = tmp_path / "cache"
    assert bookexec.execute_chapters([good, other, bad], cache_path, jobs=2, timeout=120) == 1
    out = capsys.readouterr().out
    assert "c.ipynb" in out and "FAILED" in out and "ValueError" in out
    cache = get_cache(str(cache_path))
    rec = cache.match_cache_notebook(nbformat.read(good, as_version=4))  # the build finds it
    assert rec.data["execution_seconds"] > 0
    executed = cache.get_cache_bundle(rec.pk).nb
    assert executed.cells[1].outputs[0]["text"] == "1 42\n"  # one thread per kernel
    with pytest.raises(KeyError):
        cache.match_cache_notebook(nbformat.read(bad, as_version=4))  # left to the build
    assert bookexec.execute_chapters([good, other], cache_path, jobs=2, timeout=120) == 0
    assert "every chapter is cached" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [(["--jobs", "0", "x.ipynb"], "--jobs=0"), (["missing.ipynb"], "missing")])
def test_bad_arguments_are_rejected(args, message, capsys):
    with pytest.raises(SystemExit):
        bookexec.main(args)
    assert message in capsys.readouterr().err


def test_the_published_book_gives_each_kernel_its_chapter_s_profile(tmp_path, monkeypatch, capsys):
    """ICL_BOOK_PROFILE=stored: paper where the run store holds a chapter's runs, quick otherwise."""
    from icl_lib.book import plan

    code = "import os; print(os.environ.get('ICL_PROFILE'))"
    stored = _notebook(tmp_path / "01_setup.ipynb", code + "  # 1")  # the cache matches by code: make it differ
    missing = _notebook(tmp_path / "02_patterns.ipynb", code + "  # 2")
    asked = []

    def profiles(names, book=None):
        asked.append(list(names))
        return {"01_setup": "paper", "02_patterns": "quick"}

    monkeypatch.setattr(plan, "published_profiles", profiles)
    monkeypatch.setattr(bookexec, "_warn_paper_training", lambda profiles: None)  # these have no parameters cell
    monkeypatch.setenv("ICL_PROFILE", "quick")
    monkeypatch.setenv("ICL_BOOK_PROFILE", "stored")
    cache_path = tmp_path / "cache"
    assert bookexec.execute_chapters([stored, missing], cache_path, jobs=2, timeout=120, fingerprint="f") == 0
    assert asked == [["01_setup", "02_patterns"]]
    assert "01 paper, 02 quick" in capsys.readouterr().out
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    for path, profile in ((stored, "paper"), (missing, "quick")):
        rec = cache.match_cache_notebook(nbformat.read(path, as_version=4))
        assert cache.get_cache_bundle(rec.pk).nb.cells[0].outputs[0]["text"] == profile + "\n"
    monkeypatch.delenv("ICL_BOOK_PROFILE")
    assert bookexec.chapter_profiles([stored]) == {stored: None}  # unset: the kernel inherits ICL_PROFILE


def test_a_bad_book_profile_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    nb = _notebook(tmp_path / "a.ipynb", "x = 1")
    monkeypatch.setenv("ICL_BOOK_PROFILE", "papers")
    with pytest.raises(SystemExit):
        bookexec.main(["--cache", str(tmp_path / "cache"), nb])
    assert "ICL_BOOK_PROFILE='papers' is invalid: accepted stored or unset" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()
    with pytest.raises(ValueError, match="ICL_BOOK_PROFILE='papers'"):
        bookexec.chapter_profiles([nb])


def test_a_paper_build_says_before_any_work_what_it_would_train(tmp_path, monkeypatch, capsys):
    from icl_lib.book.plan import BOOK

    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "cache"))
    paths = [str(BOOK / "01_setup.ipynb"), str(BOOK / "04_ode_phases.ipynb")]
    bookexec._warn_paper_training({paths[0]: "paper", paths[1]: "paper"})
    assert "trains 1 runs (500,000 model-steps) that neither the run cache nor the run store holds" in \
        capsys.readouterr().out
    bookexec._warn_paper_training({paths[0]: "quick", paths[1]: "paper"})  # chapter 4 trains nothing
    assert capsys.readouterr().out == ""


def test_nbval_waits_for_a_cells_output_longer_than_its_5_s_default():
    """book/conftest.py raises nbval's wait for each output message of a chapter's cells."""
    from icl_lib.book.plan import BOOK

    seen = []

    class Spy:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items):
            seen.extend(getattr(item, "output_timeout", None) for item in items)

    args = ["--collect-only", "-q", "--nbval-lax", "-p", "no:randomly", "-p", "no:cacheprovider",
            str(BOOK / "01_setup.ipynb")]
    assert pytest.main(args, plugins=[Spy()]) == 0
    assert seen and set(seen) == {120}
