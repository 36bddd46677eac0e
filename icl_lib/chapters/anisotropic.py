"""Chapter 6's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.anisotropic`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.anisotropic import SEEDS, AnisotropicSetup

# Every other library name chapter 6's code uses, so that the chapter imports this module alone.
from .. import figures
from ..circuits import effective_preconditioner
from ..config import DataConfig
from ..engine import train_groups
from ..paper1.anisotropic.runs import pos_neg_runs, training_summary
from ..paper1.anisotropic.learned import (
    b3_estimates,
    circuit_table,
    distance_sweep,
    head_split_histories,
    initial_spread_rival,
    inverse_distances,
    ov_magnitude_estimate,
    ov_magnitude_rival,
    ov_magnitudes,
    preconditioner_values,
    split_at,
    split_floor,
    sweep_estimates,
)
from ..paper1.anisotropic.model_losses import (
    length_losses,
    loss_estimates,
    loss_summary,
    rho_sweep_losses,
    plain_gd_rival,
)
from ..paper1.anisotropic.preconditioner import optimal_preconditioner, reference_values, risk_check, risk_estimates
from ..stats import median_ci, ratio

__all__ = [
    "SEEDS", "AnisotropicSetup", "b3_estimates", "circuit_table", "DataConfig",
    "distance_sweep", "effective_preconditioner", "figures", "head_split_histories", "initial_spread_rival",
    "inverse_distances", "length_losses", "loss_estimates", "loss_summary", "median_ci", "optimal_preconditioner",
    "ov_magnitude_estimate", "ov_magnitude_rival", "ov_magnitudes", "rho_sweep_losses", "plain_gd_rival",
    "pos_neg_runs", "preconditioner_values", "ratio",
    "reference_values", "risk_check", "risk_estimates", "split_at", "split_floor", "sweep_estimates",
    "train_groups", "training_summary", "glue_values",
]


def glue_values(values: dict, skip=()) -> None:
    """Glue each value of ``values`` under the name ``ch6_<key>`` (numpy scalars as Python numbers,
    which ``{glue:text}`` can format), but the keys in ``skip`` (values the chapter's text does not
    quote).  Chapter 6's text cites every value it glues."""
    import numpy as np
    from myst_nb import glue

    for key, value in values.items():
        if key in skip:
            continue
        glue(f"ch6_{key}", value.item() if isinstance(value, np.generic) else value, display=False)
