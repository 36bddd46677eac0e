"""Chapter 9's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.phase_diagram`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.phase_diagram import PhaseDiagramSetup

# Every other library name chapter 9's code uses, so that the chapter imports this module alone.
from .. import figures, stats
from ..config import DataConfig
from ..engine import describe_sources, train, train_config, train_groups
from ..paper1.phase_diagram import grid, mechanism, trap
from ..paper1.approx_loss import ApproxLossConfig
from ..paper1.dynamics.approx_descent import approx_gd, ApproxGDConfig
from ..paper1.phase_diagram.outcomes import (
    attach_losses,
    cell_table,
    MIN_CELL_RUNS,
    grid_models,
    outcome_counts,
    paper_scope,
    rate_estimates,
    time_panels,
    time_scaling,
    worst_cell,
    worst_cell_where,
)
from ..paper1.phase_diagram.attribution import (
    AXIS_CLAIMS,
    axis_law,
    AXIS_UNITS,
    init_ceiling,
    outcome_matrix,
    predictor_vs_ceiling,
    switch_effects,
    trap_axes,
)
from ..paper1.phase_diagram.stationarity import stationarity_study
from ..seeding import derive_seed
from ..stats import fraction_diff, proportion_ci

__all__ = [
    "PhaseDiagramSetup", "approx_gd", "ApproxGDConfig", "ApproxLossConfig", "attach_losses", "AXIS_CLAIMS",
    "axis_law", "AXIS_UNITS", "cell_table", "DataConfig", "derive_seed",
    "describe_sources", "figures", "fraction_diff", "init_ceiling", "MIN_CELL_RUNS", "grid_models",
    "outcome_matrix", "outcome_counts", "grid", "predictor_vs_ceiling", "proportion_ci", "rate_estimates",
    "stationarity_study", "stats", "switch_effects", "mechanism", "time_panels", "time_scaling", "train", "train_config",
    "train_groups", "trap", "trap_axes", "worst_cell", "worst_cell_where", "paper_scope",
]
