"""Tooling around the library: the command line, the benchmark and the book build's helpers.

* :mod:`~icl_lib.tools.cli`      -- ``python -m icl_lib train`` (an ensemble, with checkpoints)
* :mod:`~icl_lib.tools.bench`    -- ``make bench``: the engine against a plain reference
* :mod:`~icl_lib.tools.bookexec` -- ``make book``: chapters executed side by side into the Jupyter Cache
* :mod:`~icl_lib.tools.bookstats` -- ``make book``: how long each chapter took
"""
