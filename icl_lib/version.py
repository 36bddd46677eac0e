"""Version constants, at the bottom of the package so that every module can import them.

``__version__`` is the library's release; ``MODEL_CODE_VERSION`` names the numerics of a trained
run (model, sampler, initialisation, trainer) and is part of every run-cache key
(:meth:`icl_lib.config.RunSpec.key`).  Bump it when a change alters the numbers a run produces.
"""

__all__ = ["__version__", "MODEL_CODE_VERSION"]

__version__ = "0.1.0"
MODEL_CODE_VERSION = "4"
