"""The chapters' setups (icl_lib.chapters): one declaration of a chapter's parameters and runs.

Built from a chapter's ``parameters`` cell, a setup validates every parameter with the chapter's
messages, resolves the profile and the profile's seeds, and declares the runs the chapter trains
and the book's plan lists."""

from __future__ import annotations

import dataclasses
import json
import inspect
from pathlib import Path

import pytest

from icl_lib import DataConfig, ModelConfig, TrainConfig
from icl_lib.config import RunSpec
from icl_lib.paper1.optimality.trained import VARIANTS
from icl_lib.paper1.sensitivity import ALTERNATIVES
from icl_lib.setups import (SETUPS, AnisotropicSetup, DynamicsSetup, MultitaskSetup, OptimalitySetup,
                            PatternsSetup, PhaseDiagramSetup, ProblemSetup)
from icl_lib.setups.base import flat, grouped, split
from icl_lib.book.plan import BOOK, book_plan, chapter_parameters

TRAINING = ("01_setup", "02_patterns", "03_two_stage_dynamics", "05_optimality", "06_anisotropic", "07_multitask",
            "09_phase_diagram")


def setup(chapter: str, profile: str = "quick", **overrides):
    """The chapter's setup with its default parameters (the parameters cell) and ``overrides``."""
    params = {**chapter_parameters(BOOK / f"{chapter}.ipynb"), "profile": profile, **overrides}
    return SETUPS[chapter].from_parameters(**params)


def sizes(s) -> dict[str, int]:
    return {k: len(v) for k, v in s.runs().items()}


def test_every_training_chapter_has_a_setup_taking_exactly_its_parameters():
    assert tuple(SETUPS) == TRAINING
    for chapter, cls in SETUPS.items():
        assert cls.chapter == chapter
        sig = inspect.signature(cls.from_parameters).parameters
        assert all(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in sig.values()), chapter
        assert list(sig) == list(chapter_parameters(BOOK / f"{chapter}.ipynb")), chapter
        assert "Chapter" in cls.__doc__ and cls.__module__.startswith("icl_lib.setups.")


def test_the_setups_runs_are_the_books_plan_in_both_profiles():
    for profile in ("quick", "paper"):
        plan = book_plan(profile)
        for chapter in TRAINING:
            s = setup(chapter, profile)
            assert s.specs() == flat(s.runs()) == plan[chapter], (profile, chapter)


def test_chapter_1_trains_one_model():
    s = setup("01_setup")
    assert isinstance(s, ProblemSetup) and sizes(s) == {"model": 1}
    assert s.runs()["model"] == [s.spec]
    assert (s.spec.model.heads, s.spec.seed, s.spec.train.steps, s.spec.data) == (2, 0, 4000, s.data)
    assert s.data == DataConfig(d=5, L=40, sigma2=0.1) and s.train.lr == 3e-3


def test_chapter_2_the_sweep_and_the_optimiser_settings():
    s = setup("02_patterns")
    assert isinstance(s, PatternsSetup)
    assert (s.profile, s.heads, s.seeds, s.sens_seeds) == ("quick", [1, 2, 3, 4], 12, 6)
    assert sizes(s) == {"sweep": 4 * 12, "settings": 3 * 6}  # no anchors in the quick profile
    sweep = s.sweep()
    assert list(sweep) == [1, 2, 3, 4] and all([r.seed for r in runs] == list(range(12)) for runs in sweep.values())
    assert all(r.model.heads == H for H, runs in sweep.items() for r in runs)
    settings = s.settings()
    assert list(settings) == list(ALTERNATIVES)
    assert {r.seed for g in settings.values() for r in g} == set(range(2000, 2006))
    assert {r.model.heads for g in settings.values() for r in g} == {3}
    assert settings["lr x3"][0].train.lr == 3 * s.train.lr and settings["batch 64"][0].train.batch == 64
    assert sizes(setup("02_patterns", sens_heads=0)) == {"sweep": 48}
    paper = setup("02_patterns", "paper")
    assert paper.paper_setting
    assert sizes(paper) == {"sweep": 4 * 36 + 16 + 4, "settings": 3 * 12, "anchors": 3 * 128}  # the extension
    assert {H: len(rs) for H, rs in paper.sweep().items()} == {1: 36, 2: 52, 3: 40, 4: 36}
    assert sizes(setup("02_patterns", "paper", seeds=10))["sweep"] == 40  # a reader's seeds: no extension
    for chapter in ("03_two_stage_dynamics", "05_optimality"):  # the same sweep, so the same stored runs
        theirs = {r for rs in setup(chapter, "paper").sweep().values() for r in rs}
        assert theirs <= {r for rs in paper.sweep().values() for r in rs}
    anchors = flat(paper.anchors())  # {H: runs}, trained with the chapter's execution
    assert {r.train.steps for r in anchors} == {20_000} and min(r.seed for r in anchors) == 1000
    assert set(paper.anchors()) == {r.model.heads for r in anchors} == {2, 3, 4}
    assert not setup("02_patterns", "paper", L=20).anchors()  # not the paper's setting: no anchors


def test_chapter_3_reads_chapter_2s_runs():
    s = setup("03_two_stage_dynamics")
    assert isinstance(s, DynamicsSetup) and s.sweep_heads == [2, 3, 4] and sizes(s) == {"sweep": 3 * 9}
    assert set(s.specs()) <= set(setup("02_patterns").specs())
    assert setup("03_two_stage_dynamics", heads=[2], gd_heads=4).sweep_heads == [2, 4]


def test_chapter_5_the_sweep_the_variants_and_the_proportional_regime():
    s = setup("05_optimality")
    assert isinstance(s, OptimalitySetup)
    assert sizes(s) == {"sweep": 4 * 6, "variants": 5 * 6, "proportional": 3 * 4, "sphere": 6}
    assert all(r.model.heads == 1 and r.data.covariates == "sphere" for r in s.sphere())
    assert set(s.runs()["sweep"]) <= set(setup("02_patterns").specs())
    variants = s.variants()
    assert tuple(variants) == VARIANTS and all(r.model.attention == k for k, g in variants.items() for r in g)
    assert variants["softmax"] == s.sweep()[2]  # the softmax variants are the sweep's two-head runs
    prop = s.proportional()
    assert list(prop) == [0.125, 0.25, 0.5] and [g[0].data.L for g in prop.values()] == [64, 32, 16]
    assert s.Ls == [5, 10, 20, 40, 80, 120, 200]  # the training L is among them


def test_chapter_6_two_heads_per_rho():
    s = setup("06_anisotropic", rho=0.6)
    assert isinstance(s, AnisotropicSetup) and s.sweep_rhos == [0.0, 0.3, 0.5, 0.6, 0.8]
    sweep = s.rho_sweep()
    assert list(sweep) == s.sweep_rhos and sizes(s) == {"rhos": 5 * 10}
    assert all(r.data.rho == rho and r.model.heads == 2 for rho, g in sweep.items() for r in g)
    assert s.data.rho == 0.6


def test_chapter_7_the_sweep_on_several_tasks():
    s = setup("07_multitask")
    assert isinstance(s, MultitaskSetup) and sizes(s) == {"sweep": 4 * 12}
    assert s.supports == ((0, 1, 2, 3), (2, 3, 4, 5)) and s.data.n_tasks == 2
    assert all(r.data == s.data for r in s.specs())


def test_chapter_9_the_trap_sweep_then_the_grid():
    s = setup("09_phase_diagram")
    causes = {"causes: base": 8 * 3, "causes: batch 4096": 8, "causes: SGD": 8, "causes: form (3.1)": 8}
    assert isinstance(s, PhaseDiagramSetup) and sizes(s) == {"sweep": 88, "grid": 92, "longer": 4 * 2,
                                                             "continued": 16, **causes}
    # the sweep and the grid share 32 runs; the longer runs and the anchor cell's seeds continued
    # train five horizons
    assert len(set(s.specs())) == 148 + 8 + 48 + 16 and s.horizon.steps == 6000
    assert {r.train.steps for r in s.runs()["continued"]} == {5 * 6000}
    assert {r.train.steps for r in s.specs()} == {6000, 5 * 6000}
    assert sum(s.sweep.plan().values()) == 88 and sum(s.grid_plan.values()) == 92


@pytest.mark.parametrize("chapter, name, bad, message", [
    ("01_setup", "sigma2", 0.0, "sigma2=0.0 is invalid: accepted sigma2 > 0 when L < d"),
    ("02_patterns", "heads", 0, "heads=0 is invalid: accepted an integer in [1, 8]"),
    ("02_patterns", "sens_heads", 1, "sens_heads=1 is invalid: accepted 0 (no runs) or 2 to 8 heads"),
    ("02_patterns", "seeds", 41, "seeds=41 is invalid: accepted an integer in [1, 40]"),
    ("03_two_stage_dynamics", "heads", [1], "heads="),
    ("05_optimality", "prop_xis", [2.0], "prop_xis"),
    ("06_anisotropic", "rhos", [1.0], "rhos[0]=1.0 is invalid"),
    ("07_multitask", "supports", [[0, 9], [1]], "supports[0]"),
    ("09_phase_diagram", "trap_heads", [1], "trap_heads[0]=1 is invalid"),
    ("09_phase_diagram", "grid_heads", [9], "grid_heads[0]=9 is invalid"),
    ("09_phase_diagram", "descent_steps", 5, "descent_steps=5 is invalid"),
    ("09_phase_diagram", "kick", 0.0, "kick=0.0 is invalid"),
])
def test_a_bad_value_raises_a_ValueError_naming_the_parameter(chapter, name, bad, message):
    overrides = {name: bad, **({"L": 3} if chapter == "01_setup" else {})}
    with pytest.raises(ValueError) as err:
        setup(chapter, **overrides)
    assert str(err.value).startswith(message), str(err.value)


def test_the_profile_and_its_seeds_are_resolved_once(monkeypatch):
    quick, paper = setup("02_patterns", seeds=None, sens_seeds=None), setup("02_patterns", "paper", seeds=None)
    assert (quick.seeds, quick.sens_seeds, paper.seeds, paper.sens_seeds) == (12, 6, 36, 12)
    assert setup("02_patterns", seeds=3).seeds == 3  # a given number is kept
    assert (quick.train.steps, quick.train.lr, paper.train.steps, paper.train.lr) == (4000, 3e-3, 500_000, 1e-3)
    assert setup("02_patterns", steps=100, lr=0.01).train == dataclasses.replace(quick.train, steps=100, lr=0.01)
    assert (setup("03_two_stage_dynamics").seeds, setup("05_optimality").variant_seeds,
            setup("05_optimality").prop_seeds, setup("06_anisotropic").seeds) == (9, 6, 4, 10)
    monkeypatch.setenv("ICL_PROFILE", "paper")  # "auto" reads ICL_PROFILE, then the device
    s = setup("02_patterns", "auto")
    assert (s.profile, s.seeds, s.device) == ("paper", 36, "cpu")  # the device resolved, never "auto"
    with pytest.raises(ValueError, match=r"^profile='fast' is invalid"):
        setup("02_patterns", "fast")


def test_a_setup_is_frozen():
    s = setup("01_setup")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.heads = 3


def test_grouping_keeps_the_builders_order():
    specs = [RunSpec(DataConfig(d=2, L=4), ModelConfig(heads=H), TrainConfig(steps=5), seed=k)
             for H in (1, 2) for k in range(3)]
    by_heads = grouped(specs, lambda s: s.model.heads)
    assert list(by_heads) == [1, 2] and flat(by_heads) == specs
    assert split(specs, ["a", "b"], 3) == {"a": specs[:3], "b": specs[3:]}



def test_every_chapter_bounds_its_seed_by_the_one_bound():
    """One bound for every chapter's ``seed``: SEED_MAX less the run seeds the chapter may count
    from it (its ``span``), checked once in resolve_common with the same message."""
    from icl_lib.setups.base import SEED_MAX, check_seed

    assert check_seed(SEED_MAX) == SEED_MAX and check_seed(SEED_MAX - 159, span=160) == SEED_MAX - 159
    for chapter in SETUPS:
        assert setup(chapter, seed=2**40).seed == 2**40  # far beyond a 31-bit seed, within the bound
        with pytest.raises(ValueError, match=r"^seed=-1 is invalid: accepted an integer in \[0, "):
            setup(chapter, seed=-1)
        with pytest.raises(ValueError, match=r"^seed=" + str(SEED_MAX + 1)):
            setup(chapter, seed=SEED_MAX + 1)


def test_the_execution_is_resolved_once_and_kept():
    s = setup("02_patterns")
    assert s.execution is s.execution and s.execution.device.type == s.device == "cpu"


def test_every_chapter_with_parameters_has_a_setup_from_the_one_base():
    """Chapters 4 and 8 train nothing; their setups validate their parameters all the same."""
    from icl_lib.setups.base import ChapterSetup
    from icl_lib.setups.convergence import ConvergenceSetup
    from icl_lib.setups.ode import OdeSetup

    every = {**SETUPS, "04_ode_phases": OdeSetup, "08_preconditioned_convergence": ConvergenceSetup}
    assert sorted(every) == sorted(p.stem for p in BOOK.glob("0*.ipynb"))
    for chapter, cls in every.items():
        assert issubclass(cls, ChapterSetup) and cls.chapter == chapter
        assert list(inspect.signature(cls.from_parameters).parameters) == list(
            chapter_parameters(BOOK / f"{chapter}.ipynb")), chapter
        s = cls.from_parameters(**{**chapter_parameters(BOOK / f"{chapter}.ipynb"), "profile": "quick"})
        assert (s.profile, s.device) == ("quick", "cpu") and s.runs() == ({} if chapter in (
            "04_ode_phases", "08_preconditioned_convergence") else s.runs())
    with pytest.raises(ValueError, match="^d2=5 is invalid"):
        OdeSetup.from_parameters(**{**chapter_parameters(BOOK / "04_ode_phases.ipynb"), "d2": 5})
    with pytest.raises(ValueError, match=r"^kappas=\[1.0, 4.0\] is invalid: accepted 3 to 8"):
        ConvergenceSetup.from_parameters(**{**chapter_parameters(BOOK / "08_preconditioned_convergence.ipynb"),
                                            "kappas": "[1, 4]"})


def test_each_chapter_imports_one_library_module_which_gives_every_name_it_uses():
    """A chapter's code imports ``icl_lib.chapters.<topic>`` and nothing else of the library, and
    every ``ch.<name>`` it reads is in that module's ``__all__``."""
    import ast
    import importlib
    import json

    for path in sorted(BOOK.glob("0*.ipynb")):
        code = [("".join(c["source"])) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        trees = [ast.parse(c) for c in code]
        imports = [n for t in trees for n in ast.walk(t) if isinstance(n, (ast.Import, ast.ImportFrom))]
        lib = [n for n in imports if (n.module if isinstance(n, ast.ImportFrom) else n.names[0].name or "")
               .startswith("icl_lib")]
        assert len(lib) == 1 and lib[0].module == "icl_lib.chapters" and lib[0].names[0].asname == "ch", path.name
        module = importlib.import_module(f"icl_lib.chapters.{lib[0].names[0].name}")
        used = {n.attr for t in trees for n in ast.walk(t)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ch"}
        assert used <= set(module.__all__), (path.name, sorted(used - set(module.__all__)))


def test_no_library_function_returns_a_glue_key_and_the_engine_holds_no_chapter_settings():
    """A chapter glues what its text cites, under names it chooses: no string of the library names
    a chapter's glue key (``ch5_...``); the engine's registry holds the profiles' training only."""
    import re

    from icl_lib.engine.profiles import SETTINGS

    lib = Path(__file__).resolve().parents[1] / "icl_lib"
    found = [f"{p.relative_to(lib)}: {m.group(0)}" for p in lib.rglob("*.py")
             for m in re.finditer(r"[\"']ch\d_\w*[\"']", p.read_text())]
    assert not found, found
    assert set(SETTINGS) == {"paper1.train"}


def test_training_takes_the_setups_execution_as_it_is():
    """``train(..., execution=S.execution)`` uses the resolved execution; a device, graph or
    backend beside it is refused (the execution holds them), as is anything but an Execution."""
    from icl_lib import train

    s = setup("01_setup", steps=3)
    with pytest.raises(ValueError, match=r"^device='cpu', graph=None, backend='auto' are invalid with an execution"):
        train([s.spec], device="cpu", execution=s.execution, cache=False, use_store=False, progress=False)
    with pytest.raises(ValueError, match=r"^execution='cpu' is invalid: accepted an Execution"):
        train([s.spec], execution="cpu", cache=False, use_store=False, progress=False)
    run = train([s.spec], execution=s.execution, cache=False, use_store=False, progress=False)[0]
    assert run.spec == s.spec


def test_one_convention_for_hidden_cells():
    """A chapter's setup cells (its validation cell, and a cell that opens with imports) and its
    claims summary show their output without their code (``remove-input``); nothing else is
    hidden, and no cell hides its code behind a toggle."""
    import ast
    import json

    for path in sorted(BOOK.glob("0*.ipynb")):
        for c in json.loads(path.read_text())["cells"]:
            if c["cell_type"] != "code" or "parameters" in c["metadata"].get("tags", []):
                continue
            src, tags = "".join(c["source"]), c["metadata"].get("tags", [])
            body = ast.parse(src).body
            setup_cell = ("from_parameters(" in src or "summary_markdown()" in src
                          or (body and isinstance(body[0], (ast.Import, ast.ImportFrom))))
            assert "hide-input" not in tags, (path.name, src[:60])
            if setup_cell:
                assert tags == ["remove-input"], (path.name, src[:60])


def test_each_chapters_name_is_written_at_most_three_times():
    """A chapter's notebook name is written in its setup and its claims' declaration (the registries
    derive it from them), and at most once more, in the library and its notebook together."""
    lib = [p for p in (BOOK.parent / "icl_lib").rglob("*.py") if "__pycache__" not in p.parts]
    for nb in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        n = sum(p.read_text().count(nb.stem) for p in lib) + nb.read_text().count(nb.stem)
        assert n <= 3, f"{nb.stem} is written {n} times"


def test_a_page_is_science_prints_and_glue_at_most_a_tenth_of_its_visible_code():
    """Of a chapter's visible code lines (not hidden, not comments, not its parameters), at most one
    in ten prints or glues: a print shows what no table or figure does, and the glue that only
    feeds the text sits in hidden cells."""
    for nb_path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(nb_path.read_text())
        lines = [line for c in nb["cells"] if c["cell_type"] == "code"
                 and not {"remove-input", "remove-cell", "parameters"} & set(c["metadata"].get("tags", []))
                 for line in "".join(c["source"]).splitlines() if line.strip() and not line.strip().startswith("#")]
        plumbing = sum("print(" in line or "glue(" in line for line in lines)
        assert plumbing <= 0.1 * len(lines), f"{nb_path.stem}: {plumbing} of {len(lines)} visible lines print or glue"
