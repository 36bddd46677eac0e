"""The parallel pre-execution of chapters fills the Jupyter Cache the book build reads."""

import nbformat
import pytest

from icl_lib.tools import bookexec


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
