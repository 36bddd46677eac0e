"""Paper 2 (Goel, Soltanolkotabi, Bartlett, 2026): preconditioned GD for softmax self-attention (ch. 8).

* :mod:`~icl_lib.paper2.data`        -- problems ``(M, Sigma)`` and their samples
* :mod:`~icl_lib.paper2.loss`        -- empirical and population losses, the regulariser, gradients
* :mod:`~icl_lib.paper2.algorithms`  -- Algorithm 1 (spectral start, preconditioner) and baselines
* :mod:`~icl_lib.paper2.fits`        -- line fits with standard errors: slopes, geometric rates, drifts
* :mod:`~icl_lib.paper2.manifold`    -- the manifold of minima of ``Q``: projections, distances, curvature
* :mod:`~icl_lib.paper2.monte_carlo` -- Monte Carlo of ``E[L_hat]`` and of the oracle's gradient bias
* :mod:`~icl_lib.paper2.experiment_fits` -- the fits and the claims' estimates of each experiment
* :mod:`~icl_lib.paper2.experiments` -- chapter 8's experiments, one driver per figure
* :mod:`~icl_lib.paper2.lemmas`      -- Lemmas 1, 2 and 4 near the manifold of minima
* :mod:`~icl_lib.paper2.regulariser` -- GD with and without the regulariser from small random starts
* :mod:`~icl_lib.paper2.dimension`   -- Algorithm 1's rate against the dimension ``d``
"""
