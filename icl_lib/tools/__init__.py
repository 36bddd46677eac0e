"""Tooling around the library: the command line and the benchmark.

* :mod:`~icl_lib.tools.cli`   -- ``python -m icl_lib``: ``train`` (an ensemble, with checkpoints), and
  the book's ``plan``, ``train-plan``, ``store`` and ``record`` (from :mod:`icl_lib.book`)
* :mod:`~icl_lib.tools.bench` -- ``make bench``: the engine against a plain reference

The book's own machinery (its execution, records, training plan and Sphinx extension) is the
package :mod:`icl_lib.book`.
"""
