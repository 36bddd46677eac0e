"""Each chapter's setup, from one base: its parameters validated once and its runs declared once.

A chapter's validation cell builds its setup from the chapter's ``parameters`` cell
(``PatternsSetup.from_parameters(profile=profile, seed=seed, ...)``): every parameter is checked
with the chapter's messages (a bad value raises ``ValueError`` naming it, before any work), the
profile is resolved on the device, ``None`` seeds become the profile's, and the configurations the
chapter uses (``data``, ``train``, ...) are built.  :meth:`~base.ChapterSetup.runs` declares the
chapter's runs as named groups (``{"sweep": [RunSpec, ...], ...}``); the chapter trains them
(:func:`icl_lib.train_groups` of a setup's grouped declaration, e.g. ``sweep()``), and the book's
training plan (:mod:`icl_lib.book.plan`) lists them, both from the same declaration.

One module per chapter, each holding the chapter's setup, the sizes of its runs in each profile
and nothing else (the chapter's entry point, :mod:`icl_lib.chapters`, gives it to the chapter):

* :mod:`~icl_lib.setups.problem` -- chapter 1, :class:`ProblemSetup`
* :mod:`~icl_lib.setups.patterns` -- chapter 2, :class:`PatternsSetup`
* :mod:`~icl_lib.setups.dynamics` -- chapter 3, :class:`DynamicsSetup`
* :mod:`~icl_lib.setups.ode` -- chapter 4, :class:`OdeSetup`
* :mod:`~icl_lib.setups.optimality` -- chapter 5, :class:`OptimalitySetup`
* :mod:`~icl_lib.setups.anisotropic` -- chapter 6, :class:`AnisotropicSetup`
* :mod:`~icl_lib.setups.multitask` -- chapter 7, :class:`MultitaskSetup`
* :mod:`~icl_lib.setups.convergence` -- chapter 8 (paper 2), :class:`ConvergenceSetup`
* :mod:`~icl_lib.setups.phase_diagram` -- chapter 9, :class:`PhaseDiagramSetup`

The shared base (:mod:`~icl_lib.setups.base`) resolves profile, seed and device once; the fields
of paper 1's training chapters are validated in :mod:`~icl_lib.setups.fields`.

:data:`SETUPS` maps a training chapter's notebook name to its setup (chapters 4 and 8 train no
model; their modules are imported by their chapters alone).
The layer sits above ``paper1/`` and ``paper2/`` (whose spec builders it calls) and below the
chapters' entry points (:mod:`icl_lib.chapters`), the book and the tools.
"""

from .anisotropic import AnisotropicSetup
from .base import ChapterSetup
from .dynamics import DynamicsSetup
from .multitask import MultitaskSetup
from .optimality import OptimalitySetup
from .patterns import PatternsSetup
from .phase_diagram import PhaseDiagramSetup
from .problem import ProblemSetup

__all__ = ["SETUPS", "ChapterSetup", "ProblemSetup", "PatternsSetup", "DynamicsSetup", "OptimalitySetup",
           "AnisotropicSetup", "MultitaskSetup", "PhaseDiagramSetup"]

# chapter -> its setup, in the book's order (chapters absent here train nothing)
SETUPS: dict[str, type[ChapterSetup]] = {
    s.chapter: s
    for s in (ProblemSetup, PatternsSetup, DynamicsSetup, OptimalitySetup, AnisotropicSetup, MultitaskSetup,
              PhaseDiagramSetup)
}
