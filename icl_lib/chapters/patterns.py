"""Chapter 2's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.patterns`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.patterns import SEEDS, SWEEP_EXTENSION, PatternsSetup

# Every other library name chapter 2's code uses, so that the chapter imports this module alone.
from .. import estimators as est, figures, stats
from ..engine import describe_sources, stack_models, train_groups
from ..paper1 import sensitivity as sens, sweeps
from ..seeding import derive_seed
from ..stats import median_ci, proportion_ci

__all__ = [
    "SEEDS", "SWEEP_EXTENSION", "PatternsSetup", "derive_seed", "describe_sources", "est", "figures",
    "median_ci", "proportion_ci", "sens", "stack_models", "stats", "sweeps", "train_groups",
]
