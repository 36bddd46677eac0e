"""Each chapter's one entry point: ``from icl_lib.chapters import <topic> as ch``.

A chapter's notebook imports one module of the library, ``icl_lib.chapters.<topic>``, whose
``__all__`` names every library name the chapter's code uses: its setup (from
:mod:`icl_lib.setups`) and the functions of ``paper1/``, ``paper2/``, ``figures/``, ``stats/`` and
the engine, each imported from the module that defines it, grouped in the entry point by that
module.  An entry point defines nothing of its own but what only its chapter's page needs (chapter
6's ``glue_values``).

* :mod:`~icl_lib.chapters.problem` -- chapter 1
* :mod:`~icl_lib.chapters.patterns` -- chapter 2
* :mod:`~icl_lib.chapters.dynamics` -- chapter 3
* :mod:`~icl_lib.chapters.ode` -- chapter 4
* :mod:`~icl_lib.chapters.optimality` -- chapter 5
* :mod:`~icl_lib.chapters.anisotropic` -- chapter 6
* :mod:`~icl_lib.chapters.multitask` -- chapter 7
* :mod:`~icl_lib.chapters.convergence` -- chapter 8 (paper 2)
* :mod:`~icl_lib.chapters.phase_diagram` -- chapter 9

The layer sits above every other but the book's machinery and the tools.
"""
