"""icl_lib: the library behind the executable book on softmax attention and in-context regression.

Paper 1: He, Pan, Chen, Yang, *In-Context Linear Regression Demystified* (ICML 2025).
Paper 2: Goel, Soltanolkotabi, Bartlett, *Training Dynamics of Softmax Self-Attention* (2026).

Modules, one responsibility each.  Shared by every chapter:

* :mod:`icl_lib.config`      -- validated dataclasses (data, model, training, run spec)
* :mod:`icl_lib.data`        -- samplers for isotropic, anisotropic and multi-task regression
* :mod:`icl_lib.models`      -- R-model ensembles of H-head attention, kernel-regression predictor (3.2)
* :mod:`icl_lib.circuits`    -- KQ/OV circuits and the pattern metrics of Section 3
* :mod:`icl_lib.train`       -- the batched training engine, history, checkpoints
* :mod:`icl_lib.cache`       -- the run cache shared by chapters
* :mod:`icl_lib.profiles`    -- ``quick`` / ``paper`` / ``auto``
* :mod:`icl_lib.experiments` -- experiments shared between chapters (the H = 1..4 sweep)
* :mod:`icl_lib.estimators`  -- GD, debiased GD, ridge (Bayes), Nadaraya-Watson and their risks
* :mod:`icl_lib.plotting`    -- heatmaps, dynamics and loss plots in one style
* :mod:`icl_lib.claims`      -- the ``CLAIM`` lines every chapter ends with

Per chapter:

* :mod:`icl_lib.dynamics`    -- stage detection, (4.1) against Monte Carlo, attention norms (ch. 3)
* :mod:`icl_lib.approx_loss` -- the approximate loss (4.1), its gradient, mu*(omega) (D.17), s* (ch. 3, 4)
* :mod:`icl_lib.ode`         -- two-head gradient flow on (4.1) and its three phases, Appendix D (ch. 4)
* :mod:`icl_lib.optimality`  -- what trained models compute: length sweeps, prediction gaps, rates (ch. 5)
* :mod:`icl_lib.anisotropic` -- the optimal pre-conditioner Gamma* for covariance Sigma (ch. 6)
* :mod:`icl_lib.multitask`   -- per-task references and risks, head-allocation modes (ch. 7)
* :mod:`icl_lib.p2_data`, :mod:`icl_lib.p2_loss`, :mod:`icl_lib.p2_algorithms`,
  :mod:`icl_lib.p2_analysis`, :mod:`icl_lib.p2_experiments`, :mod:`icl_lib.p2_plots`
  -- paper 2: data, losses, Algorithm 1 and baselines, fits, drivers, figures (ch. 8)

Tools: :mod:`icl_lib.bench` (``make bench``), :mod:`icl_lib.bookexec` and :mod:`icl_lib.bookstats`
(``make book``'s chapter execution and timings) and the command line ``python -m icl_lib train``.
"""

__version__ = "0.1.0"
# Bump when a change alters the numbers a run produces (model, sampler, initialisation, trainer):
# it is part of every run-cache key.
MODEL_CODE_VERSION = "4"

from .claims import Claims  # noqa: E402
from .circuits import PatternSummary, mu_of, omega_of, summarize_pattern  # noqa: E402
from .config import DataConfig, ModelConfig, RunSpec, TrainConfig, resolve_device  # noqa: E402
from .data import Batch, TaskSampler, kms_covariance, sample_batch  # noqa: E402
from .models import AttentionEnsemble, kernel_regression_predict  # noqa: E402
from .profiles import resolve_profile, train_config  # noqa: E402
from .train import EnsembleTrainer, Run, TrainingDiverged, stack_models, train  # noqa: E402

__all__ = [
    "__version__",
    "MODEL_CODE_VERSION",
    "AttentionEnsemble",
    "Claims",
    "Batch",
    "DataConfig",
    "EnsembleTrainer",
    "ModelConfig",
    "PatternSummary",
    "Run",
    "RunSpec",
    "TaskSampler",
    "TrainConfig",
    "TrainingDiverged",
    "kernel_regression_predict",
    "kms_covariance",
    "mu_of",
    "omega_of",
    "resolve_device",
    "resolve_profile",
    "sample_batch",
    "stack_models",
    "summarize_pattern",
    "train",
    "train_config",
]
