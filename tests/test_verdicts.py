"""The book referees its own verdicts: the committed records' ledger is held to the rule-change page,
every paper claim's record carries its verdict under the declared alternatives of the book's
definitions, an equivalence that passes excludes its rival within the margin rule (or says why its
margin is wider), a claim decided on a subpopulation gives the whole population's figure, and every
value a page glues is cited by a page, none of them ``nan``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from icl_lib import definitions
from icl_lib.book import ledger, records
from icl_lib.claimsets import declared
from icl_lib.rule_changes import CHANGES, RuleChange, direction, net_effect

ROOT = Path(__file__).resolve().parents[1]


def _records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / "records" / "paper").glob("*.json"))]


def _paper_claims():
    for rec in _records():
        specs = declared(rec["chapter"])
        for c in rec["claims"]:
            if c["kind"] == "paper":
                yield rec, c, specs.find(c["cid"])


# ------------------------------------------------------------------------------------ the ledger
def test_the_ledger_ends_at_the_committed_records():
    states = ledger.load(ROOT)
    assert states, "results/records/ledger.json holds no state"
    assert states[-1]["verdicts"] == ledger.current(ROOT), "python -m icl_lib record run adds the records' state"


def test_every_verdict_that_moved_between_committed_records_is_on_the_rule_change_page():
    missing = ledger.uncovered(ledger.load(ROOT))
    assert not missing, [f"{m.chapter} {m.cid}: {m.before} -> {m.after} at {m.state}" for m in missing]


def test_the_ledger_agrees_with_the_repository_history():
    history = ledger.history(ROOT)
    if history is None:
        pytest.skip("no repository history here (a shallow clone or no git)")
    states = [s["verdicts"] for s in ledger.load(ROOT)]
    at = 0
    for h in history:  # each state of the history is a state of the ledger, in the same order
        assert h["verdicts"] in states[at:], f"the ledger lacks the records' state at {h['state']}"
        at = states.index(h["verdicts"], at) + 1


def test_a_move_is_covered_only_by_an_entry_with_its_verdicts():
    states = [{"state": "a", "verdicts": {"02_x:c": "FAIL", "02_x:old": "PASS"}},
              {"state": "b", "verdicts": {"02_x:c": "PASS", "02_x:new": "PASS"}}]
    assert {(m.cid, m.before, m.after) for m in ledger.moves(states)} == {("c", "FAIL", "PASS"), ("old", "PASS", "-")}
    entry = RuleChange("02_x", ("c", "new"), "2026-12-06", "r", "r'", "why",
                       verdicts=(("c", "FAIL", "PASS"), ("old -> new", "PASS", "PASS")))
    assert ledger.uncovered(states, (entry,)) == []
    wrong = RuleChange("02_x", ("c",), "2026-12-06", "r", "r'", "why", verdicts=(("c", "INCONCLUSIVE", "PASS"),))
    assert len(ledger.uncovered(states, (wrong,))) == 2
    assert ledger.net_effect(states) == {"toward PASS": 1, "toward FAIL": 1}


def test_each_change_states_its_net_effect():
    assert direction("FAIL", "PASS") == "toward PASS" and direction("PASS", "INCONCLUSIVE") == "toward FAIL"
    assert direction("FAIL", "-") == "toward PASS" and direction("PASS", "PASS") == ""
    total = net_effect(CHANGES)
    assert total == {k: sum(c.net[k] for c in CHANGES) for k in total}


# ------------------------------------------------------------------------------------ alternatives
@pytest.mark.parametrize("chapter", sorted(c for c, s in records.RECORDED.items() if s.definitions))
def test_every_paper_claim_records_its_verdict_under_each_declared_alternative(chapter):
    rec = records.load(chapter)
    labels = {definitions.label(k, v) for k, v in records.alternatives_of(records.RECORDED[chapter])}
    for c in rec["claims"]:
        if c["kind"] == "paper" and c["verdict"] != "NOT-RUN":
            assert labels <= set(c.get("alternatives", {})), (chapter, c["cid"], sorted(labels))


def test_the_earlier_live_head_rule_is_among_the_alternatives():
    assert "both" in definitions.DEFINITIONS["live-head"].alternatives
    assert all("live-head" in s.definitions for c, s in records.RECORDED.items()
               if c not in ("01_setup", "04_ode_phases", "08_preconditioned_convergence"))


def test_a_definition_set_away_from_its_value_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(definitions.ENV, "live-head=both,shape-tol=0.35")
    assert definitions.value("live-head") == "both" and definitions.value("shape-tol") == 0.35
    assert definitions.value("live-tol") == definitions.DEFINITIONS["live-tol"].value
    monkeypatch.setenv(definitions.ENV, "live-head=sometimes")
    with pytest.raises(ValueError, match="live-head"):
        definitions.value("live-head")
    monkeypatch.setenv(definitions.ENV, "consistently=0.8")  # a reading definition is decided in the run
    with pytest.raises(ValueError, match="measurement definitions"):
        definitions.active()


# ------------------------------------------------------------------------------------ rivals, margins, populations
def test_every_passing_equivalence_excludes_its_rival_within_the_margin_rule():
    for rec, c, spec in _paper_claims():
        if spec is None or not spec.reads_equivalence or not spec.rival or c["verdict"] != "PASS":
            continue
        where = f"{rec['chapter']} {c['cid']}"
        assert "excludes(" in c["expected"], f"{where}: a PASS without its rival's value"
        if c.get("margin"):
            assert c["margin"].startswith(("follows", "departs")), f"{where}: {c['margin']}"


def test_a_claim_decided_on_the_pattern_runs_gives_the_whole_population():
    for rec, c, spec in _paper_claims():
        if c["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE") and c["population"].startswith("pattern runs"):
            assert c.get("whole"), f"{rec['chapter']} {c['cid']}: decided on the pattern's runs without the whole"


# ------------------------------------------------------------------------------------ glue in prose
_CITE = re.compile(r"\{glue(?::[a-z]+)?\}`(?:[^`]*::)?([^`:]+)(?::[^`]*)?`|\{glue:figure\}\s+(\S+)")


def _cited() -> set[str]:
    found = set()
    for path in sorted((ROOT / "book").glob("*")):
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        elif path.suffix == ".md":
            text = path.read_text()
        else:
            continue
        found |= {a or b for a, b in _CITE.findall(text)}
    return found


def test_every_glued_value_is_cited_by_a_page_and_none_in_prose_is_nan():
    cited = _cited()
    for rec in _records():
        values = rec.get("values", {})
        uncited = sorted(k for k in values if k not in cited)
        assert not uncited, f"{rec['chapter']} glues values no page cites: {uncited}"
        nan = sorted(k for k, v in values.items() if k in cited and re.search(r"\bnan\b", str(v), re.I))
        assert not nan, f"{rec['chapter']} cites nan: {nan}"
