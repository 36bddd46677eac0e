"""The seeds check: which parameter sets a chapter is run at, and which FAILs its output reports."""

from __future__ import annotations

from icl_lib.parameters import BOOK, chapter_parameters
from icl_lib.tools.seeds_check import failures, variants


def test_each_chapter_is_checked_at_other_seeds_and_one_other_shape():
    v = variants(BOOK / "02_patterns.ipynb", [1, 2, 3])
    assert v == [{"seed": 1}, {"seed": 2}, {"seed": 3}, {"L": 32}]
    for nb in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        shapes = [p for p in variants(nb, [1]) if "seed" not in p]
        params = chapter_parameters(nb)
        assert len(shapes) == int("L" in params or "d" in params), nb.name  # chapter 9's grid has its own shapes


def _executed(text: str) -> dict:
    return {"cells": [{"cell_type": "code", "outputs": [{"name": "stdout", "text": text}]}]}


def test_a_fail_counts_as_reported_only_with_its_reported_line():
    out = _executed(
        "CLAIM a PASS measured=1 interval=[0.9,1] expected=>0.5 profiles=quick,paper\n"
        "CLAIM b FAIL measured=0.1 interval=[0,0.2] expected=>0.5 profiles=quick,paper\n"
        "CLAIM c FAIL measured=0.1 interval=[0,0.2] expected=>0.5 profiles=quick,paper\n"
        "REPORTED c FAIL in this run; reported not to reproduce: at two heads the trap\n")
    claims, failed, reported = failures(out)
    assert claims == ["a", "b", "c"] and failed == ["b", "c"] and reported == ["c"]
