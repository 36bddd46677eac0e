"""Paper 2 (Goel, Soltanolkotabi, Bartlett, 2026): preconditioned GD for softmax self-attention (ch. 8).

* :mod:`~icl_lib.paper2.data`        -- problems ``(M, Sigma)`` and their samples
* :mod:`~icl_lib.paper2.loss`        -- empirical and population losses, the regulariser, gradients
* :mod:`~icl_lib.paper2.algorithms`  -- Algorithm 1 (spectral start, preconditioner) and baselines
* :mod:`~icl_lib.paper2.analysis`    -- rate and slope fits, distances to the manifold of minima
* :mod:`~icl_lib.paper2.experiments` -- chapter 8's settings and one driver per figure
"""
