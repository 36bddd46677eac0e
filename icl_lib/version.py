"""Version constants, at the bottom of the package so that every module can import them.

``__version__`` is the library's release; ``MODEL_CODE_VERSION`` names the numerics of a trained
run (model, sampler, initialisation, trainer) and is part of every run-cache key
(:meth:`icl_lib.config.RunSpec.key`).  Bump it when a change alters the numbers a run produces.
"""

__all__ = ["__version__", "MODEL_CODE_VERSION", "NUMERICS_DIGESTS", "FUSED_CODE_VERSION"]

__version__ = "0.1.0"
MODEL_CODE_VERSION = "5"
# The numerics of the fused CPU backend's own parts (its random numbers and kernels,
# icl_lib/engine/fused_math.py, fused_random.py and fused_kernels.py), part of a fused run's cache
# key; tests/engine/test_numerics.py holds the reference values of each version.  Bump it when a
# change alters a fused run's numbers.
FUSED_CODE_VERSION = "1"

# Digest of the reference runs of tests/engine/test_numerics.py under each MODEL_CODE_VERSION: that
# test fails when the numbers of training change, until a new version and its digest are recorded
# here together.  Keep the earlier entries: they document when the numerics changed.
NUMERICS_DIGESTS = {
    "4": "a8dee7cfabe4f43169ff46213951aaf5",
    "5": "0bc38ea55a6eda74c8c8c1dfcf8e8722",  # paper 1's initialisation: O from U(+-1/sqrt(D H))
}
