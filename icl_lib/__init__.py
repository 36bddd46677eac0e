"""icl_lib: the library behind the executable book on softmax attention and in-context regression.

Paper 1: He, Pan, Chen, Yang, *In-Context Linear Regression Demystified* (ICML 2025).
Paper 2: Goel, Soltanolkotabi, Bartlett, *Training Dynamics of Softmax Self-Attention* (2026).

Its layers, each importing only from those above it -- the base, the chapters' claims as data,
the engine, the two papers' analyses, the figures, the chapters' setups, their entry points, the
book's machinery and the command line -- are described once, in the book's page on how it computes (``book/engine.md``),
which ``tests/test_layers.py`` checks against the imports.
"""

from .circuits import PatternSummary, mu_of, omega_of, summarize_pattern
from .parameters import changed_parameters
from .claims import Claims
from .config import DataConfig, ModelConfig, RunSpec, TrainConfig, kms_covariance, resolve_device
from .sampling import Batch, TaskSampler, sample_batch
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
