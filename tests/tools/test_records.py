"""Recorded chapter runs (icl_lib.book.records): chapter 8's paper profile, executed once and
committed with a fingerprint of the code that decided its claims; current while that code is
unchanged, stale (and never served) once it changes."""

from __future__ import annotations

import ast
import json
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest

from icl_lib.claims import Above
from icl_lib.stats import Estimate
from icl_lib.book import records
from icl_lib.tools.cli import main
from tests.declaring import Declaring

ROOT = Path(__file__).resolve().parents[2]
CH8 = "08_preconditioned_convergence"


@pytest.fixture
def checkout(tmp_path):
    """A copy of what decides chapter 8's record: its notebook and the recorded modules."""
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / f"{CH8}.ipynb", tmp_path / "book")
    for m in records.RECORDED[CH8].modules:
        (tmp_path / "icl_lib" / m).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "icl_lib" / m, tmp_path / "icl_lib" / m)
    return tmp_path


def _edit_cell(root: Path, kind: str, text: str) -> None:
    path = root / "book" / f"{CH8}.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == kind)
    cell["source"] = cell["source"] + [text] if isinstance(cell["source"], list) else cell["source"] + text
    path.write_text(json.dumps(nb))


def test_the_fingerprint_follows_the_code_not_the_prose(checkout):
    base = records.fingerprint(CH8, checkout)
    assert base == records.fingerprint(CH8, ROOT) and base["torch"]
    _edit_cell(checkout, "markdown", "\nA rewritten sentence.")
    assert records.fingerprint(CH8, checkout) == base  # prose: the record still holds
    _edit_cell(checkout, "code", "\n# a comment")
    assert records.fingerprint(CH8, checkout) == base  # a comment: the record still holds
    _edit_cell(checkout, "code", "\nx = 1")
    now = records.fingerprint(CH8, checkout)
    assert [p for p in base if now[p] != base[p]] == [f"book/{CH8}.ipynb (code cells)"]
    (checkout / "icl_lib" / "paper2" / "loss.py").write_text("# changed\n")
    now2 = records.fingerprint(CH8, checkout)
    assert [p for p in base if now2[p] != now[p]] == ["icl_lib/paper2/loss.py"]


def _fake_run(claims_verdict_value: float = 0.6, error: str | None = None, after=None):
    """An executor that does what the chapter's kernel does: report its claims into
    ICL_CLAIMS_DIR, glue a number, and return the executed notebook."""

    def execute(notebook, env):
        assert env["ICL_PROFILE"] == "paper" and env["OMP_NUM_THREADS"] == "1"
        import os

        old = os.environ.get("ICL_CLAIMS_DIR")
        os.environ["ICL_CLAIMS_DIR"] = env["ICL_CLAIMS_DIR"]
        try:
            c = Declaring(CH8, "paper", device="cpu")
            c.test("rate", Estimate(claims_verdict_value, claims_verdict_value - 0.05, claims_verdict_value + 0.05),
                   Above(0.5), "statement of rate", "P2 Thm 2")
            try:
                c.report()
            except AssertionError:
                pass  # a failed claim: the kernel stops here, after writing its claims
        finally:
            if old is None:
                os.environ.pop("ICL_CLAIMS_DIR")
            else:
                os.environ["ICL_CLAIMS_DIR"] = old
        nb = nbformat.read(str(notebook), as_version=4)
        code = next(c for c in nb.cells if c.cell_type == "code")
        code.outputs = [nbformat.v4.new_output(
            "display_data", data={"application/papermill.record/text/plain": "0.123"},
            metadata={"scrapbook": {"name": "ch8_rate", "mime_prefix": "application/papermill.record/"}})]
        if after is not None:
            after(notebook)
        return nb, 12.5, error

    return execute


def test_a_record_holds_the_claims_provenance_and_the_executed_notebook(checkout, capsys):
    path = records.record(CH8, checkout, execute=_fake_run(), command="python -m icl_lib record run 08")
    rec = json.loads(path.read_text())
    assert path == checkout / "results" / "records" / "paper" / f"{CH8}.json"
    assert rec["profile"] == "paper" and rec["chapter"] == CH8 and rec["device"].startswith("cpu")
    assert [(c["cid"], c["verdict"]) for c in rec["claims"]] == [("rate", "PASS")]
    assert rec["seconds"] == 12.5 and rec["command"] == "python -m icl_lib record run 08" and rec["error"] is None
    assert rec["values"] == {"ch8_rate": "0.123"} and rec["recorded"] and rec["torch"]
    assert rec["fingerprint"] == records.fingerprint(CH8, checkout)
    st = records.status(CH8, checkout)
    assert st["current"] and st["changed"] == []
    nb_path = records.notebook_path(CH8, checkout)
    served = records.served(checkout / "book" / f"{CH8}.ipynb", "paper")
    assert nb_path.exists() and served is not None and served[1] == 12.5
    assert any(c.get("outputs") for c in served[0].cells)  # the executed notebook, not the source
    assert records.served(checkout / "book" / f"{CH8}.ipynb", "quick") is None  # a quick build executes it
    assert not list(path.parent.glob(".*tmp"))  # written atomically


def test_a_tampered_or_changed_checkout_makes_the_record_stale_never_served(checkout):
    records.record(CH8, checkout, execute=_fake_run())
    (checkout / "icl_lib" / "stats" / "intervals.py").write_text("# other statistics\n")
    st = records.status(CH8, checkout)
    assert not st["current"] and st["changed"] == ["icl_lib/stats/intervals.py"]
    assert records.served(checkout / "book" / f"{CH8}.ipynb", "paper") is None
    assert "STALE (changed: icl_lib/stats/intervals.py)" in records.describe(checkout)
    rec_path = records.record_path(CH8, checkout)  # a record edited by hand is stale too
    shutil.copy(ROOT / "icl_lib" / "stats" / "intervals.py", checkout / "icl_lib" / "stats" / "intervals.py")
    rec = json.loads(rec_path.read_text())
    rec["fingerprint"]["icl_lib/paper2/fits.py"] = "0" * 64
    rec_path.write_text(json.dumps(rec))
    assert records.status(CH8, checkout)["changed"] == ["icl_lib/paper2/fits.py"]


def test_failing_claims_are_recorded_and_an_error_keeps_no_notebook(checkout):
    records.record(CH8, checkout, execute=_fake_run())
    assert records.notebook_path(CH8, checkout).exists()
    path = records.record(CH8, checkout, execute=_fake_run(0.3, error="AssertionError: 1 claim(s) failed"))
    rec = json.loads(path.read_text())
    assert [c["verdict"] for c in rec["claims"]] == ["FAIL"] and rec["error"].startswith("AssertionError")
    assert not records.notebook_path(CH8, checkout).exists()  # the earlier run's notebook is gone with it
    assert records.served(checkout / "book" / f"{CH8}.ipynb", "paper") is None


def test_a_run_that_stops_before_its_claims_or_an_edit_during_it_records_nothing(checkout):
    def crash(notebook, env):
        return nbformat.v4.new_notebook(), 3.0, "RuntimeError: out of memory"

    with pytest.raises(RuntimeError, match="stopped before its claims"):
        records.record(CH8, checkout, execute=crash)
    edit = _fake_run(after=lambda nb: (checkout / "icl_lib" / "paper2" / "data.py").write_text("# edited\n"))
    with pytest.raises(RuntimeError, match="changed while it ran"):
        records.record(CH8, checkout, execute=edit)
    assert records.load(CH8, checkout) is None


def test_a_claims_only_record_keeps_no_notebook_and_follows_every_deciding_module(tmp_path):
    """Paper 1's chapters record their claims only (the book executes them from the run store), with
    a fingerprint of every module that computes or decides, not of the tools or the figures."""
    name = "02_patterns"
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / f"{name}.ipynb", tmp_path / "book")
    shutil.copytree(ROOT / "icl_lib", tmp_path / "icl_lib", ignore=shutil.ignore_patterns("__pycache__"))
    mods = records.modules_of(name, tmp_path)
    assert "stats/intervals.py" in mods and "paper1/sweeps.py" in mods and "engine/store.py" in mods
    assert not any(m.startswith(("tools/", "figures/", "paper2/")) for m in mods)
    # it follows what its entry point and its claims import, not another chapter's declarations
    assert "claimsets/patterns.py" in mods and "claimsets/optimality.py" not in mods
    assert "chapters/patterns.py" in mods and "chapters/phase_diagram.py" not in mods

    def execute(notebook, env):
        import os

        os.environ["ICL_CLAIMS_DIR"] = env["ICL_CLAIMS_DIR"]
        try:
            c = Declaring(name, "paper", device="cpu")
            c.test("x", Estimate(0.6, 0.55, 0.65), Above(0.5), "s")
            c.report()
        finally:
            os.environ.pop("ICL_CLAIMS_DIR")
        return nbformat.read(str(notebook), as_version=4), 4.0, None

    records.record(name, tmp_path, execute=execute)
    assert records.status(name, tmp_path)["current"] and not records.notebook_path(name, tmp_path).exists()
    assert records.served(tmp_path / "book" / f"{name}.ipynb", "paper") is None  # executed, not served
    (tmp_path / "icl_lib" / "figures" / "style.py").write_text("# another style\n")
    assert records.status(name, tmp_path)["current"]
    (tmp_path / "icl_lib" / "paper1" / "sweeps.py").write_text("# changed\n")
    assert records.status(name, tmp_path)["changed"] == ["icl_lib/paper1/sweeps.py"]
    assert records.select_many("02, 08") == [name, CH8] and records.select_many("all") == list(records.RECORDED)


def test_the_recorded_modules_cover_every_module_they_import():
    """Adding an import of another icl_lib module to a recorded module must add it to RECORDED
    (or its change would go unnoticed).  Left out on purpose: engine/profiles.py (its settings
    entry is fingerprinted), config.py and version.py (the device name, the version string),
    the engine's training-only parts (records.TRAINING_ONLY: they compute no number of a record
    evaluated from the run store); and for a
    claims-only record the figures a chapter's entry point gives it (they decide no claim)."""
    for name, spec in records.RECORDED.items():
        declared = set(records.modules_of(name))
        imported = set().union(*(records.imported_modules(ROOT / "icl_lib" / m, ROOT / "icl_lib") for m in declared))
        missing = imported - declared - {"engine/profiles.py", "config.py", "version.py"}
        missing = {m for m in missing if not m.startswith(records.TRAINING_ONLY)}
        if spec.modules is None and not spec.notebook:  # a claims-only record: figures decide nothing
            missing = {m for m in missing if not m.startswith(records.NOT_DECIDING)}
        assert not missing, f"{name}: {sorted(missing)} missing from RECORDED"
        code = "".join("".join(c["source"]) for c in json.loads((ROOT / "book" / f"{name}.ipynb").read_text())["cells"]
                       if c["cell_type"] == "code")
        for folder in spec.excluded:  # a folder left out of the fingerprint is one the chapter never imports
            assert f"icl_lib.{folder.strip('/').replace('/', '.')}" not in code, (name, folder)


def test_every_recorded_chapter_has_a_current_committed_record():
    """A change to the code that decided a committed record makes it stale: record it again
    (python -m icl_lib record run <chapter>: about an hour and a half on one core for chapter 8,
    seconds to minutes from the run store for the others).  A training chapter whose paper runs
    the committed run store does not yet hold in full cannot be recorded without training them:
    the book builds it in the quick profile (book.plan.published_profiles) and never serves its
    stale record, and this test names it until the store holds its runs."""
    from icl_lib.engine.store import RunStore
    from icl_lib.book.plan import book_plan

    plan, store = book_plan("paper"), RunStore()
    for name in records.RECORDED:
        st = records.status(name)
        if name in plan and not store.status(plan[name])["complete"]:
            assert st["current"] or records.served(ROOT / "book" / f"{name}.ipynb", "paper") is None, name
            warnings.warn(f"{name}: the run store lacks some of its paper runs; its record waits for them")
            continue
        assert st["record"] is not None, f"{name} has no committed record"
        assert st["current"], f"the record of {name} is stale: changed since {st['changed']}"
        assert all(c["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE", "NOT-RUN") for c in st["record"]["claims"])


def test_the_record_command_names_a_bad_chapter_and_shows_the_status(capsys):
    assert main(["record", "run", "10"]) == 2
    assert "chapter='10' is invalid" in capsys.readouterr().err
    assert main(["record", "run"]) == 2
    assert main(["record", "status"]) == 0
    assert CH8 in capsys.readouterr().out


def test_a_current_record_publishes_the_chapter_in_paper_and_the_build_serves_it(checkout, tmp_path, monkeypatch,
                                                                                 capsys):
    """CI's published book (ICL_BOOK_PROFILE=stored) shows chapter 8 in the paper profile from its
    record: bookexec caches the recorded notebook instead of executing (half an hour here)."""
    from jupyter_cache import get_cache

    from icl_lib.book import execute as bookexec, plan

    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    book_dir = checkout / "book"
    assert plan.published_profiles([CH8], book_dir) == {CH8: "quick"}  # no record yet
    records.record(CH8, checkout, execute=_fake_run())
    assert plan.published_profiles([CH8], book_dir) == {CH8: "paper"}
    monkeypatch.setenv("ICL_BOOK_PROFILE", "stored")
    source = str(book_dir / f"{CH8}.ipynb")
    cache_path = tmp_path / "jcache"
    assert bookexec.execute_chapters([source], cache_path, jobs=1, timeout=1, fingerprint="f") == 0
    assert "served from its committed record (12 s when recorded" in capsys.readouterr().out
    cache = get_cache(str(cache_path))
    rec = cache.match_cache_notebook(nbformat.read(source, as_version=4))  # the build finds it
    assert rec.data["execution_seconds"] == 12.5
    cached = cache.get_cache_bundle(rec.pk).nb
    assert any(c.get("outputs") for c in cached.cells)  # the recorded outputs, not the source
    monkeypatch.setenv("ICL_BOOK_PROFILE", "")
    monkeypatch.setenv("ICL_PROFILE", "quick")  # a quick build executes the chapter: no record of quick
    assert bookexec._serve_record(cache, source, None) is False


def test_a_record_keeps_each_claims_verdict_under_each_declared_alternative(tmp_path, monkeypatch):
    """A chapter that reads trained circuits is executed again under each alternative of its
    measurement definitions (ICL_DEFINITIONS set for the kernel); each claim keeps the verdict
    every one gives, and a claim an alternative does not decide is marked "-"."""
    name = "02_patterns"
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / f"{name}.ipynb", tmp_path / "book")
    shutil.copytree(ROOT / "icl_lib", tmp_path / "icl_lib", ignore=shutil.ignore_patterns("__pycache__"))
    seen = []

    def execute(notebook, env):
        import os

        alt = env.get("ICL_DEFINITIONS", "")
        seen.append(alt)
        os.environ["ICL_CLAIMS_DIR"] = env["ICL_CLAIMS_DIR"]
        monkeypatch.setenv("ICL_DEFINITIONS", alt)
        try:
            c = Declaring(name, "paper", device="cpu")
            value = 0.4 if alt == "live-head=both" else 0.6  # the earlier rule would fail the claim
            c.test("x", Estimate(value, value - 0.05, value + 0.05), Above(0.5), "s")
            if not alt.startswith("shape-tol"):
                c.test("y", Estimate(0.9, 0.8, 1.0), Above(0.5), "s")
            c.report()
        finally:
            os.environ.pop("ICL_CLAIMS_DIR")
            monkeypatch.delenv("ICL_DEFINITIONS")
        return nbformat.read(str(notebook), as_version=4), 4.0, None

    records.record(name, tmp_path, execute=execute)
    expected = [records.label(k, v) for k, v in records.alternatives_of(records.RECORDED[name])]
    assert seen == [""] + expected
    rec = records.load(name, tmp_path)
    x = next(c for c in rec["claims"] if c["cid"] == "x")
    y = next(c for c in rec["claims"] if c["cid"] == "y")
    assert x["verdict"] == "PASS" and x["alternatives"]["live-head=both"] == "FAIL"
    assert all(v == "PASS" for k, v in x["alternatives"].items() if k != "live-head=both")
    assert y["alternatives"]["shape-tol=0.35"] == "-" and y["alternatives"]["live-tol=0.1"] == "PASS"
    assert rec["alternatives_seconds"] == 4.0 * len(expected)


def test_a_part_no_longer_followed_leaves_a_record_current_and_every_followed_part_must_match(checkout):
    """A record made while a module was fingerprinted stays current once that module is declared
    not to decide (it no longer follows it); a part it follows that changed, or that it lacks,
    makes it stale."""
    records.record(CH8, checkout, execute=_fake_run())
    path = records.record_path(CH8, checkout)
    rec = json.loads(path.read_text())
    rec["fingerprint"]["icl_lib/engine/fused_kernels.py"] = "0" * 64  # a module no longer followed
    path.write_text(json.dumps(rec))
    assert records.status(CH8, checkout)["current"]
    del rec["fingerprint"]["icl_lib/paper2/fits.py"]  # a followed part the record lacks
    path.write_text(json.dumps(rec))
    assert records.status(CH8, checkout)["changed"] == ["icl_lib/paper2/fits.py"]
