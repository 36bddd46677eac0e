"""Paper 1 (He, Pan, Chen, Yang, ICML 2025): the analyses behind chapters 2-7 and 9.

* :mod:`~icl_lib.paper1.sweeps`      -- the H = 1..4 sweep that chapters 2, 3 and 5 share (run cache)
* :mod:`~icl_lib.paper1.approx_loss` -- the approximate loss (4.1), its gradient, mu*(omega) (D.17), s*
* :mod:`~icl_lib.paper1.dynamics`    -- package: stage detection, (4.1) against Monte Carlo, attention norms,
  gradient descent on (4.1), the solution manifold (ch. 3)
* :mod:`~icl_lib.paper1.ode`         -- the two-head gradient flow on (4.1) and its phases, App. D (ch. 4)
* :mod:`~icl_lib.paper1.optimality`  -- package: what trained models compute: lengths, gaps, rates (ch. 5)
* :mod:`~icl_lib.paper1.anisotropic` -- package: the optimal pre-conditioner for covariance Sigma (ch. 6)
* :mod:`~icl_lib.paper1.multitask`   -- package: per-task references and risks, head-allocation modes (ch. 7)
* :mod:`~icl_lib.paper1.phase_diagram` -- package: the grid of chapter 9, what its runs ended in, the
  single-sign trap and why a seed ends in it (ch. 9)
"""
