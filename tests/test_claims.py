"""Claims.report() in a real kernel: the printed CLAIM lines and the JSON output the book reads."""

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.declaring import Declaring
from icl_lib.claims import CLAIMS_GLUE_KEY, CLAIMS_MIME, Claims

ROOT = Path(__file__).resolve().parents[1]


def _run(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
    client.km = client.create_kernel_manager()
    client.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    client.execute(env=env)
    return nb


def test_report_in_a_kernel_prints_lines_and_json_with_cells():
    nb = _run(
        [
            "from tests.declaring import Declaring\nclaims = Declaring('99_t', 'quick')",
            "x = 1",
            "claims.check('first', True, 0.5, 'x < 1', 'the first statement')",
            "claims.check('second', False, [1, 2], 'y > 3', 'the second statement')",
            "claims.report()",
        ]
    )
    counts = [c.execution_count for c in nb.cells]
    last = nb.cells[-1].outputs
    text = "".join(o.get("text", "") for o in last if o.output_type == "stream")
    assert "CLAIM first PASS measured=0.5 interval=- expected=x<1 profiles=quick,paper\n" in text
    assert "CLAIM second FAIL measured=[1,2] interval=- expected=y>3 profiles=quick,paper\n" in text
    shown = [o for o in last if o.output_type == "display_data" and "text/html" in o.data]
    assert len(shown) == 1 and "first" in shown[0].data["text/html"]  # the table, as before
    # the JSON is a MyST-NB glue record: read as glue data, shown nowhere
    from myst_nb.ext.glue import extract_glue_data

    glued = extract_glue_data(nb, list(range(len(nb.cells))), logger=None)
    assert list(glued) == [CLAIMS_GLUE_KEY]
    assert [o for o in nb.cells[-1].outputs if o.output_type == "display_data"] == shown
    payload = glued[CLAIMS_GLUE_KEY]["data"][CLAIMS_MIME]
    assert payload["chapter"] == "99_t" and payload["profile"] == "quick" and payload["device"] == "cpu"
    first, second = payload["claims"]
    assert (first["cid"], first["verdict"], first["statement"]) == ("first", "PASS", "the first statement")
    assert (second["cid"], second["verdict"], second["measured"]) == ("second", "FAIL", "[1,2]")
    # each claim names the cell that checked it by its execution count
    assert (first["cell"], second["cell"]) == (counts[2], counts[3])
    assert any(o.output_type == "error" and o.ename == "AssertionError" for o in last)


def test_payload_outside_ipython_has_no_cell():
    c = Declaring("t", "paper", device="cpu")
    c.check("a", True, 1.0, "x", "s")
    p = c.payload()
    assert p["claims"][0]["cell"] is None and p["device"] == "cpu" and p["profile"] == "paper"
    # the device as the chapter's setup resolved it (and checked it: a wrong one fails there)
    assert Declaring("t", "quick", device="cuda").claims.device == "cuda"


def test_verdicts_are_decided_on_the_interval():
    """PASS when the whole interval satisfies the rule, FAIL when none of it does, INCONCLUSIVE in
    between; a rival hypothesis inside the interval makes it INCONCLUSIVE; a claim declared for
    another profile is NOT-RUN whatever it measured; only FAIL fails the report."""
    from icl_lib.claims import Above, Below, Excludes, Within
    from icl_lib.stats import Estimate

    c = Declaring("t", "quick", device="cpu")
    e = lambda lo, hi: Estimate((lo + hi) / 2, lo, hi)  # noqa: E731
    cases = [(Within(-0.02, 0.02), (-0.01, 0.01), "PASS"), (Within(-0.02, 0.02), (-0.03, 0.01), "INCONCLUSIVE"),
             (Within(-0.02, 0.02), (0.03, 0.05), "FAIL"), (Above(0.5), (0.6, 0.9), "PASS"),
             (Above(0.5), (0.4, 0.9), "INCONCLUSIVE"), (Above(0.5), (0.1, 0.5), "FAIL"),
             (Below(0.1), (0.0, 0.09), "PASS"), (Below(0.1), (0.1, 0.2), "FAIL"),
             (Within(-0.02, 0.02) & Excludes(-0.013), (-0.005, 0.01), "PASS"),
             (Within(-0.02, 0.02) & Excludes(-0.013), (-0.015, 0.01), "INCONCLUSIVE"),
             (Above(0.5) & Excludes(0.7), (0.1, 0.3), "FAIL")]
    for k, (rule, (lo, hi), want) in enumerate(cases):
        assert c.test(f"c{k}", e(lo, hi), rule, "s") is None  # no output in a notebook cell
        assert c.items[-1].verdict == want, (rule.text, lo, hi)
    c.test("paper-only", e(0.0, 0.0), Above(1.0), "s", profiles="paper")
    assert c.items[-1].verdict == "NOT-RUN"
    assert c.items[-1].measured == "-" and c.items[-1].line().endswith("profiles=paper")
    assert c.counts() == {"PASS": 4, "FAIL": 4, "INCONCLUSIVE": 3, "NOT-RUN": 1}
    with pytest.raises(AssertionError, match="4 claim"):
        c.report()
    ok = Declaring("t", "quick", device="cpu")
    ok.test("i", e(0.4, 0.9), Above(0.5), "s")
    ok.not_run("n", ">1", "s")
    ok.report()  # INCONCLUSIVE and NOT-RUN do not fail the chapter
    with pytest.raises(ValueError, match="profiles"):
        ok.test("x", e(0, 1), Above(0), "s", profiles="slow")


def test_outside_kinds_and_what_would_decide_an_undecided_claim(capsys):
    """Outside(a, b) passes when the interval lies wholly outside the window and fails when it lies
    inside; a check's kind picks its line's prefix and is counted apart; an INCONCLUSIVE claim with
    its size says how many units would decide it, and why they are not trained."""
    from icl_lib.claims import Above, Outside
    from icl_lib.stats import Estimate, proportion_ci

    c = Declaring("t", "paper", device="cpu")
    for k, (lo, hi, want) in enumerate([(1.06, 1.2, "PASS"), (0.5, 0.9, "PASS"), (0.96, 1.04, "FAIL"),
                                        (0.9, 1.0, "INCONCLUSIVE"), (1.0, 1.1, "INCONCLUSIVE")]):
        c.test(f"o{k}", Estimate((lo + hi) / 2, lo, hi), Outside(0.95, 1.05), "s")
        assert c.items[-1].verdict == want and c.items[-1].expected == "outside[0.95,1.05]"
    with pytest.raises(ValueError, match="^kind="):
        c.test("bad", Estimate(1, 0, 2), Above(0), "s", kind="derivation")
    c.test("derived", Estimate(1, 0.5, 1.5), Above(0), "s", kind="check")
    assert c.items[-1].line().startswith("CHECK derived PASS")
    assert c.counts()["PASS"] == 2 and c.counts(None)["PASS"] == 3 and c.counts("check")["PASS"] == 1
    c.test("open", proportion_ci(9, 12), Above(0.9), "s", n=12, unit="seeds per head count",
           undecided="the trap chapter decides it")
    assert c.items[-1].decide == ("leans FAIL (its point estimate fails the rule); about 25 seeds per head count "
                                  "would decide it at the measured value and spread (12 here); the trap chapter "
                                  "decides it")
    assert c.items[-1].lean == "FAIL"
    c.test("no-size", proportion_ci(9, 12), Above(0.9), "s")
    assert c.items[-1].decide == "leans FAIL (its point estimate fails the rule); the size that would decide it is not given"
    c.test("decided", proportion_ci(1, 12), Above(0.9), "s", n=12, undecided="x")
    assert c.items[-1].decide == ""  # a FAIL needs no size
    with pytest.raises(AssertionError):
        c.report()
    out = capsys.readouterr().out
    assert "UNDECIDED open: leans FAIL (its point estimate fails the rule); about 25 seeds per head count" in out and "UNDECIDED decided" not in out


def test_a_reported_non_reproduction_keeps_its_verdict_and_only_it_does_not_fail_the_chapter(capsys):
    """A claim written before the run that then failed keeps FAIL in its line, counts and JSON;
    report() prints a REPORTED line for it and raises only for the other failures."""
    from icl_lib.claims import Above
    from icl_lib.stats import Estimate

    note = "fails at the defaults: 2 of 12 seeds, see 'What the quick run shows'"
    c = Declaring("t", "quick", device="cpu")
    c.test("known", Estimate(0.2, 0.1, 0.4), Above(0.5), "s", known_failure=note)
    c.check("known-check", False, 1.0, "x", "s", known_failure="fails on seed 7, see above")
    c.test("known-but-passes", Estimate(0.9, 0.8, 1.0), Above(0.5), "s", known_failure="fails at d = 4")
    assert [i.verdict for i in c.items] == ["FAIL", "FAIL", "PASS"]
    assert c.counts()["FAIL"] == 2 and c.payload()["claims"][0]["known_failure"] == note
    assert c.items[0].line().startswith("CLAIM known FAIL measured=0.2 interval=[0.1,0.4]")
    c.report()  # every failure is a reported one: the chapter runs to its end
    out = capsys.readouterr().out
    assert f"REPORTED known FAIL in this run; reported not to reproduce: {note}" in out
    # a claim reported not to reproduce elsewhere that passes in this run carries no report
    assert "REPORTED known-but-passes" not in out and out.count("REPORTED") == 2
    assert c.items[2].known_failure == ""
    c.test("new-failure", Estimate(0.2, 0.1, 0.4), Above(0.5), "s")
    with pytest.raises(AssertionError, match="1 claim.*new-failure"):
        c.report()
    for bad in ("   ", None):
        with pytest.raises(ValueError, match="known_failure"):
            c.test("x", Estimate(0.9, 0.8, 1.0), Above(0.5), "s", known_failure=bad)


def test_summary_markdown_counts_by_kind_and_lists_what_did_not_pass():
    from icl_lib.claims import Above
    from icl_lib.stats import Estimate, proportion_ci

    c = Declaring("t", "paper", device="cpu")
    c.test("ok", Estimate(1, 0.5, 1.5), Above(0), "s")
    c.test("open", proportion_ci(9, 12), Above(0.9), "s", n=12, undecided="why")
    c.test("gone", Estimate(-1, -2, -0.5), Above(0), "s", known_failure="reported here")
    c.check("derived", True, 1, "x", kind="check")
    c.not_run("later", ">0", "s", profiles=("quick",))
    text = c.summary_markdown()
    assert text.startswith("4 claims of the papers: 1 pass, 1 fail, 1 inconclusive, 1 not run in this profile.")
    assert "1 checks of the book's own derivations and design: 1 pass" in text
    assert "`ok`" not in text and "`derived`" not in text
    assert "- `open` **INCONCLUSIVE**: measured 0.75" in text and "undecided: leans FAIL (its point estimate fails the rule); about 25 seeds" in text
    assert "- `gone` **FAIL**" in text and "reported not to reproduce: reported here" in text
    assert "- `later` **NOT-RUN** (declared for quick)" in text


def test_a_decision_reads_its_population_and_writes_who_it_left_out():
    """``among=(kept, of)``: n is the kept units unless given, and the record says how many of
    how many the declared population left out (nothing when it kept them all); a hand-written
    sentence beside it is refused."""
    from icl_lib.claims import Above
    from icl_lib.stats import Estimate

    c = Declaring("t", "paper")
    c._declare("a", Above(0.5), "s")
    c.claims.decide("a", Estimate(0.9, 0.8, 1.0), among=(30, 36))
    c._declare("b", Above(0.5), "s")
    c.claims.decide("b", Estimate(0.9, 0.8, 1.0), among=(36, 36), n=12)
    a, b = c.claims.items
    assert a.population.endswith("left out: 6 of 36") and "left out" not in b.population
    c._declare("c", Above(0.5), "s")
    with pytest.raises(ValueError, match="^among="):
        c.claims.decide("c", Estimate(0.9, 0.8, 1.0), among=(37, 36))
    with pytest.raises(ValueError, match="^left_out="):
        c.claims.decide("c", Estimate(0.9, 0.8, 1.0), among=(3, 36), left_out="3 seeds")
    c.claims.decide("c", Estimate(0.9, 0.8, 1.0), among=(30, 36, "not in the pattern"))
    assert c.claims.items[-1].population.endswith("left out: 6 of 36, not in the pattern")
    with pytest.raises(ValueError, match="^among="):
        c.claims.decide("c", Estimate(0.9, 0.8, 1.0), among=(30, 36, 6))
