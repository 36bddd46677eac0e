"""Every chapter's claims as data: one module per chapter, named as its setup (:mod:`icl_lib.setups`).

Each module holds ``CLAIMS``, a :class:`~icl_lib.claims.spec.ChapterClaims`: for every claim the
chapter decides, the paper's words and section, its kind and finding, its rule and where the rule
comes from, the estimand and population, the nearest rival and the profiles
(:class:`~icl_lib.claims.spec.ClaimSpec`).  The chapter decides each in one line
(:meth:`icl_lib.claims.Claims.decide`); the dashboard, the rule-change page and the committed
records read the same declarations.  :func:`declared` finds a chapter's.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from ..claims.spec import ChapterClaims

__all__ = ["declared", "every_chapter", "modules"]


@cache
def modules() -> dict[str, str]:
    """``{chapter: module}``: the module here that declares each chapter's claims (named as the
    chapter's setup in :mod:`icl_lib.setups`), by the chapter its ``CLAIMS`` names (the notebook's
    name, written once, in its ``ChapterClaims``), in the book's order."""
    found = {importlib.import_module(f"{__name__}.{info.name}").CLAIMS.chapter: info.name
             for info in pkgutil.iter_modules(__path__)}
    return dict(sorted(found.items()))


def every_chapter() -> dict[str, ChapterClaims]:
    """``{chapter: its claims}`` for every chapter of :func:`modules`."""
    return {chapter: importlib.import_module(f"{__name__}.{name}").CLAIMS for chapter, name in modules().items()}


def declared(chapter: str) -> ChapterClaims:
    """The claims declared for ``chapter`` (its notebook's name); none for a chapter without any."""
    found = modules().get(chapter)
    return importlib.import_module(f"{__name__}.{found}").CLAIMS if found else ChapterClaims(chapter)
