"""The training engine: batched ensembles, their batch sources and steps, scheduling and the run cache.

* :mod:`~icl_lib.engine.execution` -- device, draw-ahead, CUDA graphs, compilation and the CPU backend, resolved once
* :mod:`~icl_lib.engine.sources`   -- where a step's batch comes from (plain, prefetch, draw-ahead, shards)
* :mod:`~icl_lib.engine.steps`     -- one optimiser step (eager, sharded, CUDA graph) and divergence
* :mod:`~icl_lib.engine.fused`     -- the fused CPU backend, its numba code in :mod:`~icl_lib.engine.fused_math`,
  :mod:`~icl_lib.engine.fused_random` and :mod:`~icl_lib.engine.fused_kernels`
* :mod:`~icl_lib.engine.trainer`   -- :class:`EnsembleTrainer`: state, checkpoints, history, the loop
* :mod:`~icl_lib.engine.training`  -- :func:`train`: cache look-up, grouping, concurrency; :func:`train_groups`
* :mod:`~icl_lib.engine.cluster`   -- a plan's ensembles trained on a Dask cluster
* :mod:`~icl_lib.engine.run`       -- :class:`Run`, :func:`stack_models` and :func:`describe_sources`
* :mod:`~icl_lib.engine.cache`     -- the run cache shared by chapters
* :mod:`~icl_lib.engine.store`     -- the committed run store of runs trained elsewhere
* :mod:`~icl_lib.engine.atomic`    -- files written whole or not at all, and one clear error when not
* :mod:`~icl_lib.engine.profiles`  -- ``quick`` / ``paper`` / ``auto`` for both papers
"""

from .cache import RunCache, cache_dir
from .execution import Execution
from .profiles import resolve_profile, train_config
from .run import Run, describe_sources, stack_models
from .training import train, train_groups
from .steps import TrainingDiverged
from .trainer import EnsembleTrainer, validation_batch

__all__ = [
    "EnsembleTrainer",
    "Execution",
    "Run",
    "RunCache",
    "TrainingDiverged",
    "cache_dir",
    "describe_sources",
    "resolve_profile",
    "stack_models",
    "train",
    "train_config",
    "train_groups",
    "validation_batch",
]
