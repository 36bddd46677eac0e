"""What the trained attention computes and how good it is (paper 1, Section 4.3, Theorem 4.2, B.1, B.2).

Chapter 5's measurements, built on :mod:`icl_lib.estimators`, :mod:`icl_lib.circuits` and
:mod:`icl_lib.stats`, one module per section of the chapter; each section is one call returning a
table, the claims' estimates and the values the chapter glues (dicts keyed by glue name):

* :mod:`~icl_lib.paper1.optimality.trained`       -- the chapter's parameters and trained models:
  the 2-head variants of B.1 and B.2, the positive/negative runs, their circuits and linearised
  predictors;
* :mod:`~icl_lib.paper1.optimality.risks`            -- exact risks: the reference curves at every
  ``L`` and the closed forms against Monte Carlo;
* :mod:`~icl_lib.paper1.optimality.lengths`          -- length generalisation (Figure 3);
* :mod:`~icl_lib.paper1.optimality.predictions`      -- prediction-level agreement with reference
  predictors (Section 4.3) and paired losses on shared sequences;
* :mod:`~icl_lib.paper1.optimality.linearisation`    -- Theorem 4.2 (i): the error of the linearised
  predictor and its order in ``omega``;
* :mod:`~icl_lib.paper1.optimality.proportional`     -- Theorem 4.2 (iii): optimal debiased GD over
  the Bayes risk in the proportional regime, and trained models there;
* :mod:`~icl_lib.paper1.optimality.single_head`      -- the single head against kernel regressors
  (Section 4.3);
* :mod:`~icl_lib.paper1.optimality.linear_attention` -- linear attention with a fixed normaliser
  against softmax (B.1);
* :mod:`~icl_lib.paper1.optimality.activations`      -- other normalised activations and their
  effective rates (B.2, Table 1).

The intervals of the chapter's claims (:mod:`icl_lib.claims` decides on them) come from
:mod:`icl_lib.stats`: :func:`~icl_lib.stats.extreme` (the largest, smallest or largest absolute of
several measured quantities, with Bonferroni-simultaneous intervals),
:func:`~icl_lib.stats.interval_image` (a function of one interval-valued quantity),
:func:`~icl_lib.stats.paired_ratio` (two predictors on the same sequences) and
:func:`~icl_lib.stats.seed_ratio` (two groups of trained models on the same sequences, with the
spread over seeds).

Every Monte Carlo stream comes from ``derive_seed(seed, purpose, ...)`` with the chapter's
``seed``; each function names its purposes.
"""
