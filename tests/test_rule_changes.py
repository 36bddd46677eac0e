"""The rule-change page's list (icl_lib/rule_changes.json): well formed, tied to chapters and to
claims the chapters declare today (or says the claim was removed or replaced)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from icl_lib import rule_changes
from icl_lib.rule_changes import CHANGES, RuleChange, changes_of
from icl_lib.book import records

ROOT = Path(__file__).resolve().parents[1]


def test_every_change_names_a_chapter_a_date_and_why():
    assert CHANGES, "the list of rule changes is empty"
    chapters = {p.stem for p in (ROOT / "book").glob("*.ipynb")}
    for c in CHANGES:
        assert c.chapter in chapters, c
        assert c.why.strip() and c.before.strip() and c.after.strip(), c
    assert [c.date for c in CHANGES] == sorted(c.date for c in CHANGES)  # oldest first
    with pytest.raises(ValueError, match="^date="):
        RuleChange("02_patterns", ("x",), "4 Dec", "a", "b", "c")
    with pytest.raises(ValueError, match="^claims="):
        RuleChange("02_patterns", ("a b",), "2026-12-04", "a", "b", "c")


def test_every_change_is_about_a_claim_declared_today_or_says_it_is_gone():
    """The claims each chapter's committed paper record holds are today's claims; a change whose
    claims are none of them must say that they were removed or replaced, or a later change must
    (saying so, or naming each beside the claim of today that replaced it)."""
    today = {}
    for c in CHANGES:
        rec = records.load(c.chapter)
        if rec is None:
            pytest.fail(f"{c.chapter} has no committed paper record (python -m icl_lib record run {c.chapter})")
        today[c.chapter] = {x["cid"] for x in rec["claims"]}
    ended = set()
    for c in CHANGES:
        says = c.after.lower().startswith(("removed", "replaced")) or "replaced by" in c.after.lower()
        if says or today[c.chapter] & set(c.claims):
            ended |= {(c.chapter, cid) for cid in c.claims}
    for c in CHANGES:
        gone = all((c.chapter, cid) in ended for cid in c.claims)
        assert gone or today[c.chapter] & set(c.claims), (c.chapter, c.claims, c.after)


def test_changes_of_a_claim_oldest_first(monkeypatch):
    a = RuleChange("02_patterns", ("x",), "2026-12-04", "a", "b", "c")
    b = RuleChange("02_patterns", ("x", "y"), "2026-12-01", "a0", "a", "c")
    monkeypatch.setattr(rule_changes, "CHANGES", (a, b))
    assert changes_of("02_patterns", "x") == [b, a] and changes_of("02_patterns", "y") == [b]
    assert changes_of("03_two_stage_dynamics", "x") == []


def test_the_json_file_holds_the_fields_of_a_change():
    raw = json.loads((ROOT / "icl_lib" / "rule_changes.json").read_text())
    fields = {"chapter", "claims", "date", "before", "after", "why", "after_run"}
    assert all(fields <= set(r) <= fields | {"verdicts", "corrected"} for r in raw)
    assert len(raw) == len(CHANGES)


def test_verdicts_before_and_after_are_verdicts():
    c = RuleChange("02_patterns", ("x",), "2026-12-05", "a", "b", "c", verdicts=(("x", "FAIL", "PASS"),))
    assert c.verdicts == (("x", "FAIL", "PASS"),)
    with pytest.raises(ValueError, match="^verdicts="):
        RuleChange("02_patterns", ("x",), "2026-12-05", "a", "b", "c", verdicts=(("x", "fail", "PASS"),))
    with pytest.raises(ValueError, match="^verdicts="):
        RuleChange("02_patterns", ("x",), "2026-12-05", "a", "b", "c", verdicts=(("x", "PASS"),))


def test_verdict_labels_name_the_changes_claims():
    """A change listed with verdicts names each of its claims (or the claim that replaced it)."""
    for c in CHANGES:
        for label, _, _ in c.verdicts:
            assert label.split(" -> ")[0] in c.claims, (c.claims, label)
