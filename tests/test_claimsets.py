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
from icl_lib.claimsets import MODULES, declared, every_chapter
from icl_lib.paper1.trap_outcomes import AXIS_CLAIMS

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
    assert set(chapters) == set(MODULES)
    for chapter, claims in chapters.items():
        assert (ROOT / "book" / f"{chapter}.ipynb").exists(), chapter
        assert len(claims) > 0 and claims.chapter == chapter
    assert len(declared("99_unknown")) == 0  # a chapter without a module declares nothing


@pytest.mark.parametrize("chapter", sorted(MODULES))
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


def test_a_claim_of_several_ids_is_found_from_each_id():
    claims = declared("02_patterns")
    templated = [s for s in claims if s.fields]
    assert templated
    for spec in templated:
        cid, _ = spec.fill(**{f: 2 for f in spec.fields})
        assert claims.find(cid) is spec
