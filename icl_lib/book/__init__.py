"""The book's machinery, beside the science: how the book is planned, executed, recorded and shown.

* :mod:`~icl_lib.book.plan`     -- the book's training plan (every chapter's runs, from its setup);
  what it costs here (:mod:`~icl_lib.book.plan_cost`) and its training into the run cache and the
  run store (:mod:`~icl_lib.book.plan_training`)
* :mod:`~icl_lib.book.execute`  -- ``make book``: chapters executed side by side into the Jupyter Cache
* :mod:`~icl_lib.book.execution_cache`    -- when the execution cache no longer holds this code's executions
* :mod:`~icl_lib.book.timings`  -- how long each chapter took
* :mod:`~icl_lib.book.records`  -- the committed records of the chapters' paper runs
* :mod:`~icl_lib.book.sphinx`   -- the Sphinx extension: the claims dashboard, the rule-change page
  and the execution-status page (:mod:`~icl_lib.book.sphinx.pages`)

It sits above every other layer of the library but the command line (:mod:`icl_lib.tools`), which
gives its commands; no module that computes or decides a claim imports it.
"""
