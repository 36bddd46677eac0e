"""Figures in one style (:mod:`~icl_lib.figures.style`), one module per kind of figure.

* :mod:`~icl_lib.figures.heatmaps`  -- circuits, matrices and pre-conditioners (chapters 1-7)
* :mod:`~icl_lib.figures.curves`    -- against steps, context length, iterations (all chapters)
* :mod:`~icl_lib.figures.stages`    -- training stages and their timeline (chapter 3)
* :mod:`~icl_lib.figures.landscape` -- the approximate loss (4.1) against the true loss (chapter 3)
* :mod:`~icl_lib.figures.flows`     -- the two-head gradient flow's phases (chapter 4)
* :mod:`~icl_lib.figures.strips`    -- test losses of every model against references (chapters 2, 7)
* :mod:`~icl_lib.figures.optimality` -- risk ratios, linear attention, activations (chapter 5)
* :mod:`~icl_lib.figures.phase`    -- outcome maps, learned rate, time to the pattern (chapter 9)
* :mod:`~icl_lib.figures.trap`     -- the single-sign trap: rates, horizon, basin, initialisations, laws (chapter 9)

The mathematics modules of the library import no plotting code; chapters import this package
(``from icl_lib import figures``), which sets the book's style.
"""

from .curves import (
    dynamics,
    excess_curves,
    head_split_curves,
    kappa_rate_figure,
    length_loss_curves,
    loglog_points,
    loglog_positive_points,
    loss_curves,
    method_comparison_figure,
    plot_against_L,
    population_gap_figure,
    rho_distances,
    saddle_figure,
)
from .flows import compare_figure, phase_figure
from .heatmaps import (
    circuit_heatmaps,
    gamma_heatmaps,
    inverse_heatmaps,
    matrix_heatmaps,
    pattern_with_matrices,
    snapshot_heatmaps,
    stacked_circuit_heatmaps,
)
from .landscape import landscape_panels, norm_violins, valley_figure
from .optimality import (
    activation_circuits,
    activation_dynamics,
    bayes_ratio_plot,
    linear_softmax_plot,
    linearisation_plot,
)
from .phase import eta_scatter, phase_maps, time_to_pattern
from .rates import curvature_scan_figure, dimension_rate_figure, finite_rate_figure, regulariser_figure
from .trap import basin_map, settled_plot, trap_laws, trap_rates, trap_shares
from .stages import gd_comparison_figure, optimality_figure, stage_dynamics_figure, stage_timeline
from .strips import PATTERN_COLORS, interval_strip, loss_strip, task_loss_plot
from .style import CMAP, HEAD_COLORS, set_style

__all__ = [
    "curvature_scan_figure",
    "dimension_rate_figure",
    "finite_rate_figure",
    "regulariser_figure",
    "basin_map",
    "settled_plot",
    "trap_laws",
    "trap_rates",
    "trap_shares",
    "CMAP",
    "HEAD_COLORS",
    "PATTERN_COLORS",
    "activation_circuits",
    "activation_dynamics",
    "bayes_ratio_plot",
    "circuit_heatmaps",
    "compare_figure",
    "eta_scatter",
    "dynamics",
    "excess_curves",
    "gamma_heatmaps",
    "gd_comparison_figure",
    "head_split_curves",
    "interval_strip",
    "inverse_heatmaps",
    "kappa_rate_figure",
    "landscape_panels",
    "length_loss_curves",
    "linear_softmax_plot",
    "linearisation_plot",
    "loglog_points",
    "loglog_positive_points",
    "loss_curves",
    "loss_strip",
    "matrix_heatmaps",
    "method_comparison_figure",
    "norm_violins",
    "optimality_figure",
    "pattern_with_matrices",
    "phase_figure",
    "phase_maps",
    "plot_against_L",
    "population_gap_figure",
    "rho_distances",
    "saddle_figure",
    "set_style",
    "snapshot_heatmaps",
    "stacked_circuit_heatmaps",
    "stage_dynamics_figure",
    "stage_timeline",
    "task_loss_plot",
    "time_to_pattern",
    "valley_figure",
]
