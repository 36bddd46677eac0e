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

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from icl_lib.book.plan import book_plan, chapter_parameters

BOOK = Path(__file__).resolve().parents[2] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def _cells(path: Path) -> tuple[str, str]:
    """The source of the ``parameters`` cell and of the first code cell after it."""
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    k = next(i for i, c in enumerate(code) if "parameters" in c.get("metadata", {}).get("tags", []))
    return "".join(code[k]["source"]), "".join(code[k + 1]["source"])


parameters = chapter_parameters  # name -> default of a chapter's parameters cell


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
    named = re.match(rf"{re.escape(name)}(\[\d+\])*( index)?=", str(err.value))  # heads=, heads[1]=, ...
    assert named, f"{name}={bad!r}: the error names something else: {err.value}"
    assert time.perf_counter() - t0 < 30, "validation took longer than a validation"
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.pt"))


def test_every_chapter_has_a_validation_cell_for_each_parameter():
    """The cases above cover every parameter of every chapter (none is skipped silently)."""
    assert len(CHAPTERS) >= 8
    for p in CHAPTERS:
        names = parameters(p)
        assert names and {n for c, n, _ in CASES if c == p.name} == set(names), p.name


# Small, unusual, valid settings: one head count, one seed, other shapes, a few steps; every
# chapter's sizes turned down so that the whole set runs in a few minutes.
SETTINGS = {
    "01_setup.ipynb": dict(heads=1, d=4, L=16, steps=20, n_mc=2000, seed=3),
    "02_patterns.ipynb": dict(heads=3, seeds=1, d=4, L=16, steps=20, n_test=500, seed=7),
    "03_two_stage_dynamics.ipynb": dict(heads=[2], seeds=2, d=4, L=16, steps=20, gd_steps=200, n_mc=2000,
                                        norm_draws=200),
    "04_ode_phases.ipynb": dict(d=3, d2=4, L=20, t_max=1000.0),
    "05_optimality.ipynb": dict(heads=[1, 2], seeds=1, d=4, L=16, steps=20, variant_seeds=1, Ls=[8, 16, 32],
                                n_test=500, n_sets=2, lin_omegas=[0.3, 0.02, 0.05], lin_fit_max=0.05, prop_d=3,
                                sphere_seeds=1,
                                prop_xis=[0.5], prop_seeds=2, ratio_d=8, ratio_xis=[0.5, 1.0],
                                ratio_sigma2s=[0.5]),
    "06_anisotropic.ipynb": dict(rhos=[0.5], seeds=1, d=4, L=16, steps=20, eval_L=[16, 32], n_test=500, n_mc=2000),
    "07_multitask.ipynb": dict(heads=[2], seeds=1, d=5, supports=[[0, 1, 2], [2, 3, 4]], L=16, steps=20,
                               n_test=500, n_bayes=2000),
    "08_preconditioned_convergence.ipynb": dict(n=64, K=4, kappas=[1, 4, 16]),
    "09_phase_diagram.ipynb": dict(trap_heads=[2], init_scales=[0.5], lrs=[3e-3], seeds=2, anchor_seeds=2, steps=100,
                                   n_mc=1000, n_batches=4, restricted_steps=10, grid_heads=[2, 1],
                                   grid_shapes=[[3, 12], [4, 8]], grid_sigma2s=[0.2], grid_lrs=[1e-2, 3e-3],
                                   grid_init_scales=[0.5], grid_seeds=2, grid_slice_seeds=1, n_test=500, seed=5,
                                   cause_inits=2, cause_draws=2, switch_draws=1, descent_steps=20,
                                   descent_batch=64),
}


def _run_chapter(chapter: str, params: dict, out_dir: Path) -> tuple[str, float, str | None]:
    """Execute a chapter with papermill; returns (chapter, seconds, problem or None).  The chapter
    must finish (few steps fail claims: a re-run reports them), say that its parameters are set
    away from its own and print its verdicts."""
    import subprocess
    import sys

    import nbformat
    import yaml

    out = out_dir / chapter
    log = out_dir / f"{chapter}.runs.jsonl"
    env = dict(os.environ, ICL_PROGRESS="0", OMP_NUM_THREADS="1", ICL_CACHE_DIR=str(out_dir / "cache"),
               ICL_RUN_LOG=str(log))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "papermill", str(BOOK / chapter), str(out), "--cwd", str(BOOK),
                           "-y", yaml.safe_dump(params), "--no-progress-bar"],
                          capture_output=True, text=True, env=env, timeout=900)
    seconds = time.perf_counter() - t0
    if not out.exists():
        return chapter, seconds, f"papermill wrote nothing: {proc.stderr[-2000:]}"
    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [(k, o) for k, c in enumerate(code) for o in c.get("outputs", []) if o.output_type == "error"]
    asked = {json.loads(line)["key"] for line in log.read_text().splitlines()} if log.exists() else set()
    planned = {s.key("cpu") for s in book_plan("quick", BOOK, {chapter[:-6]: params}).get(chapter[:-6], [])}
    if asked != planned:  # the plan must know every run a chapter trains, and no other
        return chapter, seconds, f"trained {len(asked)} runs, the plan lists {len(planned)} ({len(asked & planned)} shared)"
    if errors:  # a re-run with parameters away from the chapter's finishes, whatever its verdicts
        k, err = errors[0]
        return chapter, seconds, f"cell {k} of {len(code)}: {err.ename}: {err.evalue[:500]}"
    if proc.returncode != 0:
        return chapter, seconds, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    printed = "".join(o.get("text", "") for c in code for o in c.get("outputs", []) if o.output_type == "stream")
    if f"RE-RUN {chapter[:-6]} with parameters set away from the chapter's own" not in printed:
        return chapter, seconds, "no RE-RUN note before its verdicts"
    if not re.search(r"^(CLAIM|CHECK) \S+ (PASS|FAIL|INCONCLUSIVE|NOT-RUN) ", printed, re.M):
        return chapter, seconds, "no verdict printed"
    return chapter, seconds, None


@pytest.mark.chapters
def test_every_chapter_runs_on_small_unusual_settings(tmp_path):
    """The README's own example (chapter 2 with one head count) failed before with "'SubFigure'
    object is not iterable"; so did chapter 7 with heads=2.  Each chapter asks icl_lib.train for
    exactly the runs that the book's plan lists for it with these parameters."""
    assert set(SETTINGS) == {p.name for p in CHAPTERS}
    for chapter, params in SETTINGS.items():
        assert set(params) <= set(parameters(BOOK / chapter)), chapter
    with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda kv: _run_chapter(*kv, tmp_path), SETTINGS.items()))
    problems = [f"{c} ({s:.0f} s): {p}" for c, s, p in results if p]
    assert not problems, "\n".join(problems)
