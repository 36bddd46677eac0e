"""Anisotropic covariates: the optimal pre-conditioner of one-step GD and the learned one
(paper 1, B.3 and C.2, Figures 11 and 14; chapter 6).

Data: ``x_i, x_q ~ N(0, Sigma)`` with the Kac-Murdock-Szego covariance ``Sigma_ij = rho^|i-j|``;
chapter 6 trains two-head models at several ``rho`` and compares what they learn with the optimal
pre-conditioner of one-step GD, one module per part of the chapter:

* :mod:`~icl_lib.paper1.anisotropic.preconditioner` -- the closed forms: the risk of one-step
  pre-conditioned GD, the optimal pre-conditioner ``Gamma*`` and its risk, their check by Monte
  Carlo, and the distances and shapes that compare matrices;
* :mod:`~icl_lib.paper1.anisotropic.runs`     -- the chapter's parameters and its runs (one
  two-head model per ``rho`` and seed), and the positive/negative ones among them;
* :mod:`~icl_lib.paper1.anisotropic.learned`        -- the learned pre-conditioner read from the
  circuits, against ``Gamma*``, ``Sigma^{-1}`` and ``I``, and the claims of B.3 on it;
* :mod:`~icl_lib.paper1.anisotropic.model_losses`   -- the trained models' ICL loss against GD
  pre-conditioned by ``Gamma*`` and plain GD, at the training length and beyond.

The claims' intervals come from :mod:`icl_lib.stats` (medians over seeds, the largest over
``rho``).
"""
