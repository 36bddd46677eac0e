"""Chapter execution times read back from a build's Jupyter Cache (icl_lib.book.timings)."""

import time
from datetime import datetime, timezone

import nbformat
import pytest

from icl_lib.book import timings as bookstats


def _cache_chapter(build, name, source, seconds):
    """Cache one executed notebook as bookexec does: the bundle carries ``execution_seconds``."""
    from jupyter_cache import get_cache
    from jupyter_cache.cache.main import CacheBundleIn

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    uri = str(build / "chapters" / name)
    data = {} if seconds is None else {"execution_seconds": seconds}
    get_cache(str(build / ".jupyter_cache")).cache_notebook_bundle(CacheBundleIn(nb, uri, data=data),
                                                                   check_validity=False)
    return uri


@pytest.fixture
def tokyo_time():
    """Local time UTC+9, so that reading the cache's naive UTC times as local time would shift them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "Asia/Tokyo")
        time.tzset()
        yield
    time.tzset()


def test_execution_records_read_every_cached_notebook(tmp_path, tokyo_time):
    """One record per cached notebook, sorted by uri, with its seconds and its UTC creation time (not local)."""
    before = datetime.now(timezone.utc)
    b = _cache_chapter(tmp_path, "b.ipynb", "x = 2", 2.5)
    a = _cache_chapter(tmp_path, "a.ipynb", "x = 1", 1.5)
    untimed = _cache_chapter(tmp_path, "c.ipynb", "x = 3", None)
    rows = bookstats.execution_records(tmp_path)
    assert [r["uri"] for r in rows] == [a, b, untimed]
    assert [r["seconds"] for r in rows] == [1.5, 2.5, None]
    for r in rows:
        assert r["created"].tzinfo is not None
        assert abs((r["created"] - before).total_seconds()) < 60  # stored in UTC, read back as UTC


def test_execution_records_without_a_cache_is_empty(tmp_path):
    """A build folder without .jupyter_cache must give no records, not create a cache or fail."""
    assert bookstats.execution_records(tmp_path) == []
    assert not (tmp_path / ".jupyter_cache").exists()


def test_main_reports_no_records(tmp_path, capsys):
    """Without records main says so and still exits 0."""
    assert bookstats.main([str(tmp_path)]) == 0
    assert "no execution records found" in capsys.readouterr().out


def test_main_lists_each_chapter_and_the_sum(tmp_path, capsys):
    """Every chapter is listed by file name with its seconds; the sum counts them all without --since."""
    _cache_chapter(tmp_path, "a.ipynb", "x = 1", 1.5)
    _cache_chapter(tmp_path, "b.ipynb", "x = 2", 2.0)
    assert bookstats.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = [ln.split() for ln in out.splitlines() if ".ipynb" in ln]
    assert lines == [["a.ipynb", "1.5"], ["b.ipynb", "2.0"]]
    assert "sum of chapter execution times: 3.5 s" in out
    assert "cached" not in out


def test_main_since_marks_earlier_records_as_cached(tmp_path, capsys):
    """Records created before --since are marked cached and left out of the sum; later ones are counted."""
    _cache_chapter(tmp_path, "old.ipynb", "x = 1", 10.0)
    time.sleep(0.05)
    since = time.time()
    time.sleep(0.05)
    _cache_chapter(tmp_path, "new.ipynb", "x = 2", 2.0)
    assert bookstats.main([str(tmp_path), "--since", str(since)]) == 0
    out = capsys.readouterr().out
    old = next(ln for ln in out.splitlines() if "old.ipynb" in ln)
    new = next(ln for ln in out.splitlines() if "new.ipynb" in ln)
    assert "(cached, not re-executed)" in old and "10.0" in old
    assert "cached" not in new
    assert "sum of chapter execution times: 2.0 s" in out
    assert bookstats.main([str(tmp_path), "--since", str(time.time() + 60)]) == 0
    assert "sum of chapter execution times: 0.0 s" in capsys.readouterr().out  # everything cached
