"""Two-stage training dynamics and the approximate loss (paper 1, Sections 3, 4.1-4.2, C.1, C.4).

Chapter 3 reads chapter 2's trained runs along training (``{H: [Run per seed]}``, from
:func:`icl_lib.paper1.sweeps.heads_sweep_specs`, trained) and tests the approximate loss (4.1) that explains them,
one module per part of the chapter; each turns the runs and its Monte Carlo studies into the
tables and values that chapter 3 shows, checks as claims (each an :class:`~icl_lib.stats.Estimate`
with its interval over seeds or over Monte Carlo draws) and glues into its text:

* :mod:`~icl_lib.paper1.dynamics.stage_detection` -- the steps at which a run's history establishes
  the pattern (3.1), Stage I and Stage II, each by an explicit rule, and the chapter's stage
  tables and claims;
* :mod:`~icl_lib.paper1.dynamics.observations`    -- Observation 4: ``|omega_h|`` rises then falls,
  ``|mu_h|`` rises;
* :mod:`~icl_lib.paper1.dynamics.landscape`       -- Monte Carlo of the true ICL loss of circuits of
  the form (3.1) against (4.1), and its valley (Proposition 4.1, Figure 5);
* :mod:`~icl_lib.paper1.dynamics.norms`           -- the attention-probability norm and its
  large-L law (Figure 19);
* :mod:`~icl_lib.paper1.dynamics.approx_descent`  -- gradient descent on (4.1) from every trained
  run's own start, against the full model (Figure 20);
* :mod:`~icl_lib.paper1.dynamics.slide`        -- the transitional optimality (4.3) and the
  solution manifold (4.5) along trained runs.

Chapter 9 uses :mod:`~icl_lib.paper1.dynamics.approx_descent` and
:func:`~icl_lib.paper1.dynamics.stage_detection.first_persistent_step`; chapter 1 the
reparameterised circuits of :mod:`~icl_lib.paper1.dynamics.landscape`.
"""
