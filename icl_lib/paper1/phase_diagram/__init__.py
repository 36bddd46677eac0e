"""Chapter 9 (beyond the papers): where each of paper 1's solutions emerges, and the single-sign
trap that two-head training falls into.

* :mod:`~icl_lib.paper1.phase_diagram.grid`         -- the grid of cells (heads, shape, noise,
  optimiser) and its training, one call of the engine with the chapter's execution;
* :mod:`~icl_lib.paper1.phase_diagram.outcomes`     -- what every run of the grid ended in, per run
  and per cell, and the comparisons along its axes;
* :mod:`~icl_lib.paper1.phase_diagram.trap`         -- the trap sweep: how often two-head training
  misses the positive/negative pattern, on what that depends, which seeds;
* :mod:`~icl_lib.paper1.phase_diagram.causes`       -- initialisation or data, and the causes of the
  trap switched one at a time (the runs);
* :mod:`~icl_lib.paper1.phase_diagram.attribution`  -- what decides the trap, read from those runs
  and from the grid;
* :mod:`~icl_lib.paper1.phase_diagram.mechanism`    -- why a seed ends in the trap: the dynamics on
  (4.1) from its own start, the trap's basin, the curvature of the true loss there;
* :mod:`~icl_lib.paper1.phase_diagram.stationarity` -- minimum or saddle, decided by gradient descent
  on the true loss from the trap's end points.
"""
