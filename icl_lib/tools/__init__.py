"""Tooling around the library: the command line, the benchmark and the book build's helpers.

* :mod:`~icl_lib.tools.cli`      -- ``python -m icl_lib train`` (an ensemble, with checkpoints)
* :mod:`~icl_lib.tools.plan`     -- the book's training plan; what it costs here (:mod:`~icl_lib.tools.plan_cost`)
  and its training (:mod:`~icl_lib.tools.plan_training`)
* :mod:`~icl_lib.tools.records`  -- the committed records of the chapters' paper runs
* :mod:`~icl_lib.tools.bench`    -- ``make bench``: the engine against a plain reference
* :mod:`~icl_lib.tools.bookexec` -- ``make book``: chapters executed side by side into the Jupyter Cache
* :mod:`~icl_lib.tools.bookstats` -- ``make book``: how long each chapter took
"""
