"""Chapter 8 (paper 2: Goel, Soltanolkotabi, Bartlett, 2026): its one entry point.

The chapter imports this module alone (``ch``).  Its ``__all__`` names every library name the
chapter's code uses: its setup (:mod:`icl_lib.setups.convergence`), the experiment drivers and fits of
:mod:`icl_lib.paper2`, the figures of :mod:`icl_lib.figures.curves`, the intervals it combines, the
claims and the seeds, so that the chapter imports this module and no other.
"""

from __future__ import annotations

from ..setups.convergence import SIZES, ConvergenceSetup, ConvergenceSizes

from ..figures.curves import (
    kappa_rate_figure,
    loglog_positive_points,
    method_comparison_figure,
    population_gap_figure,
    saddle_figure,
)
from ..figures.rates import curvature_scan_figure, dimension_rate_figure, finite_rate_figure, regulariser_figure
from ..paper2 import dimension, lemmas, regulariser
from ..paper2.algorithms import METHODS, RunConfig
from ..paper2.data import P2Config, make_problem
from ..paper2.experiment_fits import (
    finite_rate_ratio,
    floor_drift,
    floor_fit,
    gap_extrapolation,
    gap_fits,
    geometric_drift,
    limit_estimate,
    limit_rival,
    one_point_fractions,
    one_point_summary,
    saddle_fit,
    transient_rate_ratio,
)
from ..paper2.experiments import (
    bias_vs_n,
    compare_methods,
    comparison_table,
    escape_time,
    escape_vs_init_scale,
    factor_balance,
    finite_rate,
    floor_vs_n,
    loss_gap_vs_n,
    method_comparison,
    one_point_scan,
    rate_vs_kappa,
    spectral_distance_vs_n,
    spectral_start_distances,
)
from ..paper2.fits import drift_z, geometric_rate, slope_over_repetitions
from ..paper2.manifold import manifold_point, whitened_perturbation
from ..seeding import derive_seed, generator
from ..stats import affine, proportion_ci
from ..version import __version__

__all__ = [
    "curvature_scan_figure", "dimension_rate_figure", "finite_rate_figure", "regulariser_figure",
    "SIZES", "ConvergenceSizes", "ConvergenceSetup",
    # the chapter's computations (icl_lib.paper2)
    "METHODS", "RunConfig", "P2Config", "make_problem", "dimension", "lemmas", "regulariser",
    "finite_rate_ratio", "floor_drift", "floor_fit", "gap_extrapolation", "gap_fits", "geometric_drift",
    "limit_estimate", "limit_rival",
    "one_point_fractions", "one_point_summary", "saddle_fit", "transient_rate_ratio",
    "bias_vs_n", "compare_methods", "comparison_table", "escape_time", "escape_vs_init_scale", "factor_balance",
    "finite_rate", "floor_vs_n", "loss_gap_vs_n", "method_comparison", "one_point_scan", "rate_vs_kappa",
    "spectral_distance_vs_n", "spectral_start_distances", "drift_z", "geometric_rate", "slope_over_repetitions",
    "manifold_point", "whitened_perturbation",
    # its figures, intervals, claims and seeds
    "kappa_rate_figure", "loglog_positive_points", "method_comparison_figure", "population_gap_figure",
    "saddle_figure", "affine", "proportion_ci", "derive_seed", "generator",
    "__version__",
]
