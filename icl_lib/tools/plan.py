"""The book's training plan: every run its chapters train, known without executing a notebook.

Each chapter that trains models has a function here that turns its parameters into the list of
:class:`~icl_lib.config.RunSpec` it asks :func:`icl_lib.train` for, built with the same library
functions the chapter calls (:func:`~icl_lib.paper1.sweeps.heads_sweep_specs`,
:func:`~icl_lib.paper1.optimality.experiment.variant_specs`,
:func:`~icl_lib.paper1.optimality.proportional.proportional_specs`,
:func:`~icl_lib.paper1.anisotropic.experiment.rho_specs`, :func:`~icl_lib.paper1.phase.grid_specs`,
:func:`~icl_lib.paper1.trap.trap_specs`); the parameters are read from the chapter's ``parameters``
cell, so the plan follows the notebooks.  (A test executes every chapter with the environment
variable ``ICL_RUN_LOG`` set and checks that the runs it asked for are exactly the plan's.)

* :func:`book_plan`  -- ``{chapter: [RunSpec, ...]}`` for a profile (:func:`select_chapters`,
  :func:`unique_specs` pick from it);
* :func:`published_profiles` -- the profile in which the published book builds each chapter;
* :mod:`icl_lib.tools.plan_cost` -- runs per chapter, the shape-compatible ensembles the engine
  trains them as, model-steps, and the time expected on this device (:func:`~icl_lib.tools.plan_cost.describe`);
* :mod:`icl_lib.tools.plan_training` -- trains the whole plan into the run cache as few large
  ensembles (:func:`~icl_lib.tools.plan_training.train_plan`), or into the run store
  (:func:`~icl_lib.tools.plan_training.store_plan`).

Command line: ``python -m icl_lib plan --profile quick|paper`` and ``python -m icl_lib train-plan``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Callable

from ..config import DataConfig, ModelConfig, RunSpec
from ..engine.profiles import profile_seeds, resolve_profile, train_config
from ..engine.store import RunStore, experiment_key, holds_all
from ..paper1.anisotropic.experiment import rho_specs
from ..paper1.optimality.experiment import variant_specs
from ..paper1.optimality.proportional import proportional_specs
from ..paper1.phase import PhaseGrid, grid_specs, profile_lrs
from ..paper1.sensitivity import FIRST_SEED as SENS_SEED, sensitivity_specs
from ..paper1.sweeps import as_heads, heads_sweep_specs
from ..paper1.trap import FIRST_SEED as TRAP_SEED, horizon_config, trap_specs, trap_sweep
from ..validate import check_choice, literal_list
from .records import served

__all__ = ["BOOK", "CHAPTER_PLANS", "chapter_parameters", "book_plan", "select_chapters", "unique_specs",
           "published_profiles", "CPU_PAPER_CHAPTERS"]

BOOK = Path(__file__).resolve().parents[2] / "book"  # the chapters of a source checkout


def chapter_parameters(path: str | Path) -> dict:
    """Name -> value of a chapter's ``parameters`` cell (plain literals, one per line)."""
    nb = json.loads(Path(path).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    params = {}
    for node in ast.parse("".join(cell["source"])).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{path}: the parameters cell holds {ast.unparse(node)!r}: accepted `name = literal`")
        params[node.targets[0].id] = ast.literal_eval(node.value)
    return params


def _train_cfg(p: dict, profile: str):
    return train_config(profile, steps=p.get("steps"), lr=p.get("lr"))


def _setup(p: dict, profile: str) -> list[RunSpec]:  # chapter 1: one model
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"])
    return [RunSpec(data=data, model=ModelConfig(heads=p["heads"]), train=_train_cfg(p, profile), seed=p["seed"])]


def _sweep(p: dict, profile: str, heads=None, data=None, group: str = "patterns") -> list[RunSpec]:  # chapter 2's
    heads = as_heads(literal_list("heads", p["heads"]) if heads is None else heads)
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"]) if data is None else data
    seeds = profile_seeds(profile, group, p["seeds"])
    return heads_sweep_specs(heads, seeds, p["seed"], data, _train_cfg(p, profile))


def _patterns(p: dict, profile: str) -> list[RunSpec]:  # chapter 2: the sweep, the other optimiser settings
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"])
    cfg = _train_cfg(p, profile)
    specs = _sweep(p, profile)
    if p["sens_heads"]:
        seeds = profile_seeds(profile, "sensitivity", p["sens_seeds"])
        specs += [s for group in sensitivity_specs(p["sens_heads"], seeds, SENS_SEED, data, cfg).values()
                  for s in group]
    if profile == "paper" and (p["d"], p["L"], p["sigma2"], cfg.lr) == (5, 40, 0.1, 1e-3):
        sweep = trap_sweep(profile)  # chapter 9's fresh seeds at the paper's setting, counted with these
        heads = [H for H in as_heads(literal_list("heads", p["heads"])) if H in sweep.heads]
        specs += grid_specs({sweep.cell(H): sweep.anchor_seeds for H in heads}, TRAP_SEED, horizon_config(profile))
    return specs


def _dynamics(p: dict, profile: str) -> list[RunSpec]:  # chapter 3: the sweep's H and gd_heads
    heads = sorted(set(as_heads(literal_list("heads", p["heads"]))) | {p["gd_heads"]})
    return _sweep(p, profile, heads=heads, group="dynamics")


def _optimality(p: dict, profile: str) -> list[RunSpec]:  # chapter 5: the sweep, 2-head variants, xi = d / L
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"])
    cfg = _train_cfg(p, profile)
    return (_sweep(p, profile, group="optimality")
            + variant_specs(profile_seeds(profile, "variants", p["variant_seeds"]), p["seed"], data, cfg)
            + proportional_specs(p["prop_d"], literal_list("prop_xis", p["prop_xis"]),
                                 profile_seeds(profile, "proportional", p["prop_seeds"]), p["seed"], p["sigma2"], cfg))


def _anisotropic(p: dict, profile: str) -> list[RunSpec]:  # chapter 6: two heads per rho and seed
    rhos = sorted({*literal_list("rhos", p["rhos"]), p["rho"]})
    seeds = profile_seeds(profile, "anisotropic", p["seeds"])
    return rho_specs(rhos, seeds, p["seed"], p["d"], p["L"], p["sigma2"], _train_cfg(p, profile))


def _multitask(p: dict, profile: str) -> list[RunSpec]:  # chapter 7: the sweep on several tasks
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"], supports=literal_list("supports", p["supports"]))
    return _sweep(p, profile, data=data)


def _beyond(p: dict, profile: str) -> list[RunSpec]:  # chapter 9: the trap sweep, then the grid's slice
    sweep = trap_sweep(profile, heads=p["trap_heads"], init_scales=p["init_scales"], lrs=p["lrs"],
                       seeds=p["seeds"], anchor_seeds=p["anchor_seeds"])
    grid = PhaseGrid(p["grid_heads"], p["grid_shapes"], p["grid_sigma2s"], profile_lrs(profile, p["grid_lrs"]),
                     p["grid_init_scales"])
    plan = grid.plan(profile, p["grid_seeds"], p["grid_slice_seeds"])
    return (trap_specs(sweep, profile, p["seed"], p["steps"])
            + grid_specs(plan, p["seed"], horizon_config(profile, p["steps"])))


# chapter -> its runs from its parameters (chapters absent here train nothing)
CHAPTER_PLANS: dict[str, Callable[[dict, str], list[RunSpec]]] = {
    "01_setup": _setup,
    "02_patterns": _patterns,
    "03_two_stage_dynamics": _dynamics,
    "05_optimality": _optimality,
    "06_anisotropic": _anisotropic,
    "07_multitask": _multitask,
    "09_phase_diagram": _beyond,
}


def book_plan(profile: str = "quick", book: str | Path = BOOK, overrides: dict | None = None) -> dict[str, list[RunSpec]]:
    """``{chapter: runs}`` of every chapter of ``book`` that trains, with the chapters' default
    parameters (``overrides``: ``{chapter: {name: value}}`` on top of them) in ``profile``."""
    profile = resolve_profile(check_choice("profile", profile, ("auto", "quick", "paper")))
    plan = {}
    for name, runs_of in CHAPTER_PLANS.items():
        path = Path(book) / f"{name}.ipynb"
        if path.exists():
            params = {**chapter_parameters(path), **(overrides or {}).get(name, {})}
            plan[name] = runs_of(params, profile)
    return plan


def select_chapters(plan: dict[str, list[RunSpec]], chapters: str | None) -> dict[str, list[RunSpec]]:
    """The chapters of ``plan`` named in ``chapters`` (comma-separated names or their number
    prefixes, e.g. ``"02,05"``; ``None``: all): the command line's ``--chapters``."""
    if chapters is None:
        return plan
    out = {}
    for token in (t.strip() for t in str(chapters).split(",")):
        hits = [c for c in plan if token and (c == token or c.split("_")[0] == token)]
        if len(hits) != 1:
            raise ValueError(f"chapters={chapters!r} is invalid: accepted comma-separated chapters of the plan "
                             f"or their numbers ({', '.join(plan)}); {token!r} matches {len(hits)}")
        out[hits[0]] = plan[hits[0]]
    return out


def unique_specs(plan: dict[str, list[RunSpec]]) -> list[RunSpec]:
    """Every run of the plan once (chapters share runs: chapter 3 and 5 reuse chapter 2's)."""
    return list(dict.fromkeys(s for specs in plan.values() for s in specs))


# Chapters that train no model and whose paper profile a CPU build computes itself: chapter 4's
# ODEs take about 10 s in it on the build machine.  Chapter 8's paper sizes (longer sequences, more
# repetitions and iterations) had not finished after 28 minutes there (one core; stopped in its
# six-method comparison, cell 26 of 80), beyond the ~15 minutes a CPU build of the paper profile
# may take, so the published book shows its quick profile.
CPU_PAPER_CHAPTERS = ("04_ode_phases",)


def published_profiles(chapters, book: str | Path = BOOK, store: RunStore | None = None) -> dict[str, str]:
    """The profile in which each of ``chapters`` (notebook names, e.g. ``"02_patterns"``) is built
    for the published book (``ICL_BOOK_PROFILE=stored make book``, as CI builds it), so that the
    CPU build trains nothing: ``paper`` for a chapter that trains when the run store holds every
    run of its paper plan, for the chapters of :data:`CPU_PAPER_CHAPTERS`, and for a chapter with a
    current committed record of its paper run (:func:`icl_lib.tools.records.served`: chapter 8);
    ``quick`` otherwise.

    So the papers' chapters show the papers' training as soon as their runs are stored, whatever
    the store holds of chapter 9's much larger grid."""
    store = store or RunStore()
    plan = book_plan("paper", book)
    current, _ = store.scan()  # read every entry once, whatever the number of chapters
    out = {}
    for name in chapters:
        if name in plan:
            out[name] = "paper" if holds_all({experiment_key(s) for s in plan[name]}, current) else "quick"
        else:
            recorded = served(Path(book) / f"{name}.ipynb", "paper") is not None
            out[name] = "paper" if name in CPU_PAPER_CHAPTERS or recorded else "quick"
    return out
