"""Chapter 7's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.multitask`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.multitask import MultitaskSetup

# Every other library name chapter 7's code uses, so that the chapter imports this module alone.
from .. import figures
from ..engine import describe_sources, train_groups
from ..paper1.multitask.head_modes import (
    classify_mode,
    effective_gamma,
    expected_mode,
    gamma_off_estimates,
    global_pattern_estimates,
    global_pattern_table,
    mode_estimates,
    mode_history_fractions,
    paper_mode_table,
    pattern_table,
    per_model_table,
    shared_ratio_estimates,
    shown_seeds,
)
from ..paper1.multitask.references import (
    check_supports,
    coordinate_groups,
    loss_gap_estimates,
    max_bayes_draws,
    optimal_gamma_shared,
    predicted_shared_ratio,
    reference_gap,
    reference_risks,
    task_loss_table,
)
from ..seeding import derive_seed
from ..stats import envelope, largest, proportion_ci, smallest

__all__ = [
    "MultitaskSetup", "check_supports", "classify_mode", "coordinate_groups",
    "derive_seed", "describe_sources", "effective_gamma", "envelope", "expected_mode", "figures",
    "gamma_off_estimates", "global_pattern_estimates", "global_pattern_table", "largest", "loss_gap_estimates",
    "max_bayes_draws", "mode_estimates", "mode_history_fractions", "optimal_gamma_shared", "paper_mode_table",
    "pattern_table", "per_model_table", "predicted_shared_ratio", "proportion_ci", "reference_gap", "reference_risks",
    "shared_ratio_estimates", "shown_seeds", "smallest", "task_loss_table", "train_groups",
]
