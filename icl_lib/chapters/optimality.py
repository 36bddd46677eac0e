"""Chapter 5's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.optimality`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.optimality import SEEDS, OptimalitySetup

# Every other library name chapter 5's code uses, so that the chapter imports this module alone.
from .. import estimators as est, figures, stats
from ..engine import stack_models, train, train_groups
from ..paper1.optimality.activations import (activation_rates, activation_table, coefficient_spread, pattern_estimate,
                                             rate_spread_estimate)
from ..paper1.optimality.trained import (
    ACTIVATIONS_B2,
    kept_variants,
    LABELS,
    learned_rate,
    linearised,
    median_abs_omega,
    posneg_counts,
    posneg_runs,
)
from ..paper1.optimality.lengths import (
    group_errors,
    labelled,
    length_curves,
    length_estimates,
    length_table,
    median_curves,
    posneg_index,
    reference_lines,
)
from ..paper1.optimality.linear_attention import linear_estimates, linear_vs_softmax, variant_errors
from ..paper1.optimality.linearisation import linearisation_curves, trained_linearisation_points, trained_order_estimate
from ..paper1.optimality.predictions import gap_estimate, gap_values, prediction_gap_curves
from ..paper1.optimality.proportional import (
    bayes_limit_estimate,
    bayes_ratio_grid,
    proportional_estimate,
    proportional_table,
    ratio_limits,
    ratio_values,
    sup_ratio_limit,
)
from ..paper1.optimality.risks import closed_form_checks, off_diagonal_mass, reference_curves
from ..paper1.optimality.single_head import single_head_vs_kernels
from ..paper1.sweeps import median_debiasing
from ..seeding import derive_seed

__all__ = [
    "SEEDS", "OptimalitySetup", "activation_rates", "activation_table", "ACTIVATIONS_B2", "bayes_limit_estimate",
    "coefficient_spread",
    "bayes_ratio_grid", "closed_form_checks", "derive_seed", "est", "figures",
    "gap_estimate", "gap_values", "group_errors", "kept_variants", "labelled", "LABELS", "learned_rate",
    "length_curves", "length_estimates", "length_table", "linear_estimates", "linear_vs_softmax",
    "linearisation_curves", "linearised", "median_abs_omega", "median_curves", "off_diagonal_mass",
    "posneg_counts", "pattern_estimate", "posneg_index", "posneg_runs", "prediction_gap_curves",
    "median_debiasing", "proportional_estimate", "proportional_table", "rate_spread_estimate", "ratio_limits",
    "ratio_values", "reference_curves", "reference_lines", "single_head_vs_kernels", "stack_models", "stats",
    "sup_ratio_limit", "train", "train_groups", "trained_linearisation_points", "trained_order_estimate",
    "variant_errors",
]
