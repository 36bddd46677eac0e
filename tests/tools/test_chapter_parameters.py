"""Every parameter a reader may pass to a chapter works or is refused at once, naming itself.

* Invalid values: for every parameter of every chapter's ``parameters`` cell, values that no
  parameter of its kind accepts (a string for a number, NaN and infinity for a real number, a
  size far beyond any machine for an integer, an empty list or a list with a string in it, an
  unknown choice) are injected as papermill injects them (assignments after the parameters cell);
  the chapter's validation cell (the first code cell after the parameters) must then raise
  ``ValueError`` naming that parameter, within seconds and before any training.
* Valid values: each chapter runs end to end under papermill with small, unusual settings (one
  head count, one seed, other shapes, a few training steps).  With so little training a claim may
  fail -- the chapter then stops in its last cell, the report -- but nothing else may.
"""

from __future__ import annotations

import ast
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[2] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def _cells(path: Path) -> tuple[str, str]:
    """The source of the ``parameters`` cell and of the first code cell after it."""
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    k = next(i for i, c in enumerate(code) if "parameters" in c.get("metadata", {}).get("tags", []))
    return "".join(code[k]["source"]), "".join(code[k + 1]["source"])


def parameters(path: Path) -> dict:
    """Name -> default value of a chapter's parameters cell (plain literals, one per line)."""
    params = {}
    for node in ast.parse(_cells(path)[0]).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, ast.unparse(node)
        params[node.targets[0].id] = ast.literal_eval(node.value)
    return params


def invalid_values(default) -> list:
    """Values that a parameter with this default refuses, whatever its range."""
    if isinstance(default, bool):
        return ["yes", 2]
    if isinstance(default, int):
        return ["x", 2.5, 10**20, float("nan")]
    if isinstance(default, float):
        return ["x", float("nan"), float("inf")]
    if isinstance(default, str):
        return ["no-such-choice", 3]
    if isinstance(default, (list, tuple)):
        return [[], ["x"], "x"]
    if default is None:  # an optional number: "None means the profile's"
        return ["x", -1]
    raise AssertionError(f"no invalid values for a default {default!r}")


CASES = [(p.name, name, bad) for p in CHAPTERS for name, default in parameters(p).items()
         for bad in invalid_values(default)]


@pytest.mark.parametrize("chapter, name, bad", CASES, ids=[f"{c[:2]}-{n}-{b!r}" for c, n, b in CASES])
def test_an_invalid_value_is_refused_by_the_validation_cell(chapter, name, bad, monkeypatch, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    params_src, validation_src = _cells(BOOK / chapter)
    monkeypatch.chdir(BOOK)
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "cache"))  # nothing may train: it would land here
    ns: dict = {"__name__": "__chapter__"}
    exec(params_src, ns)
    ns[name] = bad  # what papermill's injected cell does
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        exec(validation_src, ns)
    assert f"{name}=" in str(err.value), f"{name}={bad!r}: the error names something else: {err.value}"
    assert time.perf_counter() - t0 < 30, "validation took longer than a validation"
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.pt"))


def test_every_chapter_has_a_validation_cell_for_each_parameter():
    """The cases above cover every parameter of every chapter (none is skipped silently)."""
    assert len(CHAPTERS) >= 8
    for p in CHAPTERS:
        names = parameters(p)
        assert names and {n for c, n, _ in CASES if c == p.name} == set(names), p.name
