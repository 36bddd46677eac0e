"""The chapters' claims as data (icl_lib.claimsets): every chapter has its declarations, every claim
a chapter decides by name is declared, and the declarations follow the words-to-rules table and
the findings."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from icl_lib.claims.findings import FINDINGS
from icl_lib.claims.rules import Rule
from icl_lib.claims.words import WORDS, follows
from icl_lib.claimsets import declared, every_chapter, modules
from icl_lib.paper1.phase_diagram.attribution import AXIS_CLAIMS

ROOT = Path(__file__).resolve().parents[1]
DECIDING = ("decide", "decide_exact", "cannot_decide")


def _code(chapter: str) -> str:
    cells = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _decided_names(code: str) -> list[str]:
    """The claim names passed as a string literal to claims.decide/decide_exact/cannot_decide."""
    names = []
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DECIDING
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.append(node.args[0].value)
    return names


def test_every_chapter_has_its_claims_and_a_notebook():
    chapters = every_chapter()
    assert set(chapters) == set(modules())
    for chapter, claims in chapters.items():
        assert (ROOT / "book" / f"{chapter}.ipynb").exists(), chapter
        assert len(claims) > 0 and claims.chapter == chapter
    assert len(declared("99_unknown")) == 0  # a chapter without a module declares nothing


@pytest.mark.parametrize("chapter", sorted(modules()))
def test_every_claim_a_chapter_decides_by_name_is_declared(chapter):
    claims = declared(chapter)
    names = _decided_names(_code(chapter))
    assert names, f"{chapter} decides no claim by name"
    for name in names:
        claims.get(name)  # raises ValueError naming the declared claims when it is not declared


def test_the_grid_axes_claims_are_declared_in_chapter_9():
    claims = declared("09_phase_diagram")
    for key in AXIS_CLAIMS.values():
        assert claims.get(key).kind == "beyond"


def test_declarations_follow_the_words_table_and_name_their_findings():
    kinds = {"paper": 0, "beyond": 0, "check": 0}
    for chapter, claims in every_chapter().items():
        for spec in claims:
            kinds[spec.kind] += 1
            assert spec.finding in FINDINGS, (chapter, spec.id)
            if spec.kind == "paper":  # a paper's claim follows the table's entry or says why not
                assert spec.word or spec.departs.strip(), (chapter, spec.id)
            if spec.word and not spec.departs.strip():
                assert spec.word in WORDS and follows(spec.rule, spec.word), (chapter, spec.id)
            if isinstance(spec.rule, Rule):
                assert spec.rule.text and " " not in spec.rule.text, spec.id  # one token of a CLAIM line
            assert not spec.written or re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.written)
    assert kinds["paper"] > 0 and kinds["beyond"] > 0 and kinds["check"] > 0


@pytest.mark.parametrize("chapter", sorted(modules()))
def test_every_paper_claim_is_bound_to_the_words_table(chapter):
    """Each paper claim's quote contains a word of its entry (or the claim says why it departs from
    the table), and each claim read as an equivalence or identity names its nearest rival (or says
    why it has none)."""
    unbound = {s.id: s.unbound() for s in declared(chapter) if s.unbound()}
    assert not unbound, unbound


def test_the_rival_rule_covers_at_least_95_percent_of_equivalence_claims():
    """At least 95 % of the paper claims read as equivalences or identities name a rival."""
    read = [s for c in every_chapter().values() for s in c if s.kind == "paper" and s.reads_equivalence]
    named = [s for s in read if s.rival]
    assert read and len(named) >= 0.95 * len(read), sorted(s.id for s in read if not s.rival)


def test_a_paper_claim_without_its_words_or_rival_is_unbound():
    from icl_lib.claims.rules import Equivalent, Above
    from icl_lib.claims.spec import ClaimSpec

    loose = ClaimSpec("x", "the two losses are alike", "P1", kind="paper", finding="p1-learns",
                      rule=Equivalent(-0.1, 0.1), word="the same as", estimand="a gap")
    assert len(loose.unbound()) == 2  # no word of "the same as" in the quote; no rival
    bound = ClaimSpec("x", "the two losses are the same", "P1", kind="paper", finding="p1-learns",
                      rule=Equivalent(-0.1, 0.1), word="the same as", estimand="a gap", rival="one head")
    assert bound.unbound() == []
    said = ClaimSpec("x", "they are alike", "P1", kind="paper", finding="p1-learns", rule=Above(0.9),
                     word="consistently", departs="the paper's 'alike' read as consistently", estimand="a share")
    assert said.unbound() == []


def test_each_entry_of_the_words_table_says_what_its_code_does():
    """An entry's text names its threshold and, where it asks for one, the nearest rival; its
    classes are the rules its text describes."""
    phrase = {"Above": ("above", "one side", "beyond"), "Below": ("below", "one side", "beyond"),
              "Equivalent": ("two one-sided tests",), "Within": ("window",), "Outside": ("outside",),
              "words": ("counted", "every", "within the run's own noise")}
    for key, w in WORDS.items():
        assert w.covers and all(c == c.strip() and c for c in w.covers), key
        if w.threshold is not None:
            assert f"{w.threshold:g}" in w.rule, (key, w.threshold)
        assert ("rival" in w.rule) == w.rival, key
        for cls in w.classes:
            assert any(p in w.rule for p in phrase[cls]), (key, cls)
        if w.definition:
            from icl_lib.definitions import DEFINITIONS
            assert DEFINITIONS[w.definition].value == w.threshold, key


def test_a_claim_of_several_ids_is_found_from_each_id():
    claims = declared("02_patterns")
    templated = [s for s in claims if s.fields]
    assert templated
    for spec in templated:
        cid, _ = spec.fill(**{f: 2 for f in spec.fields})
        assert claims.find(cid) is spec
