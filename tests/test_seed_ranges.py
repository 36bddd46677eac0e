"""The seeds of paper 1's run groups (icl_lib.paper1.seed_ranges): one table, no two ranges
overlapping, and every run the chapters train with their default parameters inside the range of its
group, in both profiles."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from icl_lib.parameters import chapter_parameters
from icl_lib.setups import SETUPS, PatternsSetup, PhaseDiagramSetup
from icl_lib.paper1 import sensitivity
from icl_lib.paper1.phase_diagram import trap
from icl_lib.paper1.seed_ranges import SEED_RANGES, first_seed

BOOK = Path(__file__).resolve().parents[1] / "book"


def _range_of(setup, group: str) -> str:
    """The table's range a chapter's group of runs draws from."""
    if isinstance(setup, PhaseDiagramSetup) or group == "anchors":
        return "trap"
    if isinstance(setup, PatternsSetup) and group == "settings":
        return "sensitivity"
    return "own"


def test_no_two_ranges_overlap():
    for (a, (ra, _)), (b, (rb, _)) in itertools.combinations(SEED_RANGES.items(), 2):
        assert not set(ra) & set(rb), f"{a} and {b} share seeds"
    assert trap.TRAP_SEED == first_seed("trap") and sensitivity.SENSITIVITY_SEED == first_seed("sensitivity")


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_every_default_run_lies_in_its_groups_range(profile):
    for chapter, cls in SETUPS.items():
        setup = cls.from_parameters(**{**chapter_parameters(BOOK / f"{chapter}.ipynb"), "profile": profile})
        for group, specs in setup.runs().items():
            name = _range_of(setup, group)
            outside = sorted({s.seed for s in specs} - set(SEED_RANGES[name][0]))
            assert not outside, (chapter, profile, group, name, outside[:5])


def test_a_chapters_seed_moves_its_own_groups_and_no_other():
    params = {**chapter_parameters(BOOK / "02_patterns.ipynb"), "profile": "paper"}
    base, moved = (PatternsSetup.from_parameters(**{**params, "seed": s}) for s in (0, 7))
    for group in ("sweep", "settings"):
        assert [s.seed + 7 for s in base.runs()[group]] == [s.seed for s in moved.runs()[group]], group
    assert base.runs()["anchors"] == moved.runs()["anchors"]  # chapter 9's runs keep their seeds
    assert min(s.seed for s in base.runs()["settings"]) == first_seed("sensitivity")
