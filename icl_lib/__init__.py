"""icl_lib: the library behind the executable book on softmax attention and in-context regression.

Paper 1: He, Pan, Chen, Yang, *In-Context Linear Regression Demystified* (ICML 2025).
Paper 2: Goel, Soltanolkotabi, Bartlett, *Training Dynamics of Softmax Self-Attention* (2026).

Layers, each importing only from the ones above it in this list:

* the base -- :mod:`~icl_lib.version` (version constants), :mod:`~icl_lib.validate` (parameter
  checks), :mod:`~icl_lib.chapter` (a chapter's parameter names), :mod:`~icl_lib.seeding` (every
  seed), :mod:`~icl_lib.config` (validated dataclasses), :mod:`~icl_lib.data` (samplers),
  :mod:`~icl_lib.models` (R-model attention ensembles and the kernel-regression predictor (3.2)),
  :mod:`~icl_lib.circuits` (KQ/OV read-outs and the pattern metrics of Section 3),
  :mod:`~icl_lib.stats` (every interval a claim is decided on: intervals of one measurement, of
  quantities combined from several, and the size that would decide a claim),
  :mod:`~icl_lib.estimators` (GD, debiased GD, ridge, Nadaraya-Watson and their risks),
  :mod:`~icl_lib.claims` (the ``CLAIM`` lines every chapter ends with);
* :mod:`icl_lib.engine` -- training: execution, batch sources, steps, the fused CPU backend, the
  trainer, :mod:`~icl_lib.engine.training` (``train()``: the run-cache look-up and the scheduling
  of ensembles), :mod:`~icl_lib.engine.cluster` (a plan's ensembles on a Dask cluster), runs, the
  run cache and store, and the profiles of both papers;
* :mod:`icl_lib.paper1` -- paper 1's analyses: the shared sweep, the approximate loss (4.1),
  training dynamics, the gradient-flow ODE, optimality, anisotropic and multi-task data
  (chapters 2-7), the phase diagram and the single-sign trap (chapter 9); a chapter's back-end
  that outgrew one module is a package, one module per section;
* :mod:`icl_lib.paper2` -- paper 2: data, losses, Algorithm 1 and baselines, fits, the manifold
  of minima, Monte Carlo, experiment drivers (chapter 8);
* :mod:`icl_lib.figures` -- every figure, one module per kind, one style (the only layer that
  imports matplotlib);
* :mod:`icl_lib.chapters` -- each chapter's setup, from one base: its parameters validated once,
  its profile, device, seeds and execution resolved once, its sizes per profile and its runs
  declared (the chapter trains them, the book's training plan lists them); each module is its
  chapter's one entry point, the only library module the chapter imports;
* :mod:`icl_lib.tools` -- the command line ``python -m icl_lib``, the benchmark and the book
  build's chapter execution and timings.
"""

from .circuits import PatternSummary, mu_of, omega_of, summarize_pattern
from .chapter import changed_parameters
from .claims import Claims
from .config import DataConfig, ModelConfig, RunSpec, TrainConfig, kms_covariance, resolve_device
from .data import Batch, TaskSampler, sample_batch
from .engine import (
    EnsembleTrainer,
    Run,
    TrainingDiverged,
    describe_sources,
    resolve_profile,
    stack_models,
    train,
    train_config,
    train_groups,
)
from .models import AttentionEnsemble, kernel_regression_predict
from .seeding import derive_seed
from .version import MODEL_CODE_VERSION, __version__

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
    "derive_seed",
    "changed_parameters",
    "describe_sources",
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
    "train_groups",
]
