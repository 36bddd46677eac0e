"""Chapter 3's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.dynamics`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.dynamics import SEEDS, DynamicsSetup

# Every other library name chapter 3's code uses, so that the chapter imports this module alone.
from .. import figures
from ..engine import train_groups
from ..estimators import optimal_eta_vanilla
from ..paper1 import approx_error
from ..paper1.approx_loss import ApproxLossConfig, s_star, valley_s
from ..paper1.dynamics import stage_detection
from ..paper1.dynamics.approx_descent import (
    approx_gd_sweep,
    ApproxGDConfig,
    gd_estimates,
    gd_stages,
    gd_statistics,
    one_head_optimum,
    single_sign_end,
)
from ..paper1.dynamics.landscape import (
    landscape_mc,
    landscape_statistics,
    valley_floor,
    valley_statistics,
    valley_table,
)
from ..paper1.dynamics.slide import optimality_estimates, optimality_table, settle_order_estimate, SETTLE_TOL
from ..paper1.dynamics.norms import attention_norm_study, norm_estimates, norm_statistics
from ..paper1.dynamics.observations import observation_runs, observation_summary, observation_table, run_fraction
from ..paper1.dynamics.stage_detection import (
    history_grid,
    shown_seed,
    stage_estimates,
    stage_statistics,
    StageRules,
    sweep_stages,
)
from ..seeding import derive_seed
from ..stats import affine, median_ci, proportion_ci, sign_fraction

__all__ = [
    "SEEDS", "DynamicsSetup", "affine", "approx_error", "approx_gd_sweep", "ApproxGDConfig", "ApproxLossConfig",
    "attention_norm_study", "derive_seed", "figures", "gd_estimates", "gd_stages",
    "gd_statistics", "history_grid", "landscape_mc", "landscape_statistics", "median_ci", "norm_estimates",
    "norm_statistics",
    "observation_runs", "observation_summary", "observation_table", "one_head_optimum", "optimal_eta_vanilla",
    "optimality_estimates", "optimality_table", "proportion_ci", "run_fraction", "s_star", "settle_order_estimate",
    "SETTLE_TOL", "shown_seed", "sign_fraction", "single_sign_end", "stage_detection", "stage_estimates",
    "stage_statistics", "StageRules", "sweep_stages", "train_groups", "valley_floor", "valley_s",
    "valley_statistics", "valley_table",
]
