"""Multi-task in-context regression (paper 1, B.4 and C.3): references, risks, modes.  Chapter 7.

``N`` tasks share the covariates ``x ~ N(0, I_d)``; task ``n`` reads the coordinates ``S_n``
(``s_n = |S_n|``): ``y_n = beta_n^T x_{S_n} + eps_n``, ``beta_n ~ N(0, I_{s_n} / s_n)``, noise
``N(0, sigma2)`` independent across tasks.  A token is ``(x, y_1..y_N)`` and the attention model
has ``N`` output rows (:class:`~icl_lib.models.AttentionEnsemble` with ``n_tasks = N``).

* :mod:`~icl_lib.paper1.multitask.references` -- the coordinate groups and the chapter's parameters,
  every task's reference predictors and their exact or Monte Carlo risks, and the trained models'
  per-task losses against them;
* :mod:`~icl_lib.paper1.multitask.head_modes` -- what each head of a trained model does, the mode
  of the model (paper 1, B.4) by explicit rules, the global pattern, and the chapter's tables and
  claims on them.
"""
