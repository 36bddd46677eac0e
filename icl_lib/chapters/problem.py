"""Chapter 1's one entry point: the chapter imports this module alone (``ch``), and its ``__all__``
names every library name the chapter's code uses: its setup (:mod:`icl_lib.setups.problem`) and
the library's functions, each imported from the module that defines it."""

from __future__ import annotations

from ..setups.problem import ProblemSetup

# Every other library name chapter 1's code uses, so that the chapter imports this module alone.
from .. import estimators as est, figures, seeding, stats
from ..config import resolve_device
from ..sampling import sample_batch
from ..engine import train
from ..models import AttentionEnsemble, kernel_regression_predict
from ..paper1.dynamics.landscape import reparam_circuits
from ..seeding import derive_seed
from ..version import __version__

__all__ = [
    "ProblemSetup", "__version__", "AttentionEnsemble", "derive_seed", "est",
    "figures", "kernel_regression_predict", "reparam_circuits", "resolve_device", "sample_batch", "seeding",
    "stats", "train",
]
