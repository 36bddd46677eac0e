"""The book's training plan: every run its chapters train, known without executing a notebook.

Each chapter that trains models has a setup (:mod:`icl_lib.setups`, :data:`CHAPTER_PLANS`): the
object its validation cell builds from its parameters, whose :meth:`~icl_lib.setups.base.ChapterSetup.runs`
the chapter trains.  The plan builds the same setup from the chapter's ``parameters`` cell and lists
those runs, so the plan follows the notebooks.  (A test executes every chapter with the environment
variable ``ICL_RUN_LOG`` set and checks that the runs it asked for are exactly the plan's.)

* :func:`book_plan`  -- ``{chapter: [RunSpec, ...]}`` for a profile (:func:`select_chapters`,
  :func:`unique_specs` pick from it);
* :func:`published_profiles` -- the profile in which the published book builds each chapter;
* :mod:`icl_lib.book.plan_cost` -- runs per chapter, the shape-compatible ensembles the engine
  trains them as, model-steps, and the time expected on this device (:func:`~icl_lib.book.plan_cost.describe`);
* :mod:`icl_lib.book.plan_training` -- trains the whole plan into the run cache as few large
  ensembles (:func:`~icl_lib.book.plan_training.train_plan`), or into the run store
  (:func:`~icl_lib.book.plan_training.store_plan`).

Command line: ``python -m icl_lib plan --profile quick|paper`` and ``python -m icl_lib train-plan``.
"""

from __future__ import annotations

from pathlib import Path

from ..parameters import BOOK, chapter_parameters
from ..config import RunSpec
from ..engine.profiles import resolve_profile
from ..engine.store import RunStore, experiment_key, holds_all
from ..setups.ode import OdeSetup
from ..setups import SETUPS, ChapterSetup
from ..validate import check_choice
from .records import served

__all__ = ["BOOK", "CHAPTER_PLANS", "chapter_parameters", "book_plan", "select_chapters", "unique_specs",
           "published_profiles", "CPU_PAPER_CHAPTERS"]



# chapter -> its setup (icl_lib.setups): what the chapter's validation cell builds from its
# parameters, whose runs() it trains (chapters absent here train nothing)
CHAPTER_PLANS: dict[str, type[ChapterSetup]] = SETUPS


def book_plan(profile: str = "quick", book: str | Path = BOOK, overrides: dict | None = None) -> dict[str, list[RunSpec]]:
    """``{chapter: runs}`` of every chapter of ``book`` that trains, with the chapters' default
    parameters (``overrides``: ``{chapter: {name: value}}`` on top of them) in ``profile``."""
    profile = resolve_profile(check_choice("profile", profile, ("auto", "quick", "paper")), "auto")
    plan = {}
    for name, setup in CHAPTER_PLANS.items():
        path = Path(book) / f"{name}.ipynb"
        if path.exists():
            params = {**chapter_parameters(path), **(overrides or {}).get(name, {}), "profile": profile}
            plan[name] = setup.from_parameters(**params).specs()
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
CPU_PAPER_CHAPTERS = (OdeSetup.chapter,)


def published_profiles(chapters, book: str | Path = BOOK, store: RunStore | None = None) -> dict[str, str]:
    """The profile in which each of ``chapters`` (notebook names, ``NN_topic``) is built
    for the published book (``ICL_BOOK_PROFILE=stored make book``, as CI builds it), so that the
    CPU build trains nothing: ``paper`` for a chapter that trains when the run store holds every
    run of its paper plan, for the chapters of :data:`CPU_PAPER_CHAPTERS`, and for a chapter with a
    current committed record of its paper run (:func:`icl_lib.book.records.served`: chapter 8);
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
