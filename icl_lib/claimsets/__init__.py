"""Every chapter's claims as data: one module per chapter, named as its setup (:mod:`icl_lib.chapters`).

Each module holds ``CLAIMS``, a :class:`~icl_lib.claims.spec.ChapterClaims`: for every claim the
chapter decides, the paper's words and section, its kind and finding, its rule and where the rule
comes from, the estimand and population, the nearest rival and the profiles
(:class:`~icl_lib.claims.spec.ClaimSpec`).  The chapter decides each in one line
(:meth:`icl_lib.claims.Claims.decide`); the dashboard, the rule-change page and the committed
records read the same declarations.  :func:`declared` finds a chapter's.
"""

from __future__ import annotations

import importlib

from ..claims.spec import ChapterClaims

__all__ = ["MODULES", "declared", "every_chapter"]

# chapter notebook -> its module here
MODULES = {
    "01_setup": "problem",
    "02_patterns": "patterns",
    "03_two_stage_dynamics": "dynamics",
    "04_ode_phases": "ode",
    "05_optimality": "optimality",
    "06_anisotropic": "anisotropic",
    "07_multitask": "multitask",
    "08_preconditioned_convergence": "convergence",
    "09_phase_diagram": "phase_diagram",
}


def declared(chapter: str) -> ChapterClaims:
    """The claims declared for ``chapter`` (its notebook's name); none for a chapter not listed."""
    if chapter not in MODULES:
        return ChapterClaims(chapter)
    return importlib.import_module(f"{__name__}.{MODULES[chapter]}").CLAIMS


def every_chapter() -> dict[str, ChapterClaims]:
    """``{chapter: its claims}`` for every chapter of :data:`MODULES` whose module exists."""
    out = {}
    for chapter, name in MODULES.items():
        try:
            out[chapter] = importlib.import_module(f"{__name__}.{name}").CLAIMS
        except ModuleNotFoundError:
            continue
    return out
