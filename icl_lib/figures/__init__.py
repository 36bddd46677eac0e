"""Figures in one style (:mod:`~icl_lib.figures.style`), one module per kind of figure.

* :mod:`~icl_lib.figures.heatmaps`  -- circuits, matrices and pre-conditioners (chapters 1-7)
* :mod:`~icl_lib.figures.curves`    -- against steps, context length, iterations (all chapters)
* :mod:`~icl_lib.figures.stages`    -- training stages and their timeline (chapter 3)
* :mod:`~icl_lib.figures.landscape` -- true against approximate loss landscapes (chapter 3)
* :mod:`~icl_lib.figures.flows`     -- the two-head gradient flow's phases (chapter 4)
* :mod:`~icl_lib.figures.patterns`  -- a heads sweep's circuits and test losses (chapter 2)
* :mod:`~icl_lib.figures.strips`    -- per-task losses by head count and mode (chapter 7)

The mathematics modules of the library import no plotting code; chapters import this package
(``from icl_lib import figures``), which sets the book's style.
"""

from .curves import dynamics, excess_curves, loglog_points, loss_curves, plot_against_L
from .flows import compare_figure, phase_figure
from .heatmaps import circuit_heatmaps, gamma_heatmaps, matrix_heatmaps, snapshot_heatmaps
from .landscape import landscape_panels
from .patterns import loss_strip, stacked_circuit_heatmaps
from .stages import stage_dynamics_figure, stage_timeline
from .strips import task_loss_plot
from .style import CMAP, HEAD_COLORS, set_style

__all__ = [
    "CMAP",
    "HEAD_COLORS",
    "circuit_heatmaps",
    "compare_figure",
    "dynamics",
    "excess_curves",
    "gamma_heatmaps",
    "landscape_panels",
    "loglog_points",
    "loss_curves",
    "loss_strip",
    "matrix_heatmaps",
    "phase_figure",
    "plot_against_L",
    "set_style",
    "snapshot_heatmaps",
    "stacked_circuit_heatmaps",
    "stage_dynamics_figure",
    "stage_timeline",
    "task_loss_plot",
]
