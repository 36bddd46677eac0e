"""Compile the fused kernels into numba's on-disk cache before anything needs them.

    python -m icl_lib.engine.fused_compile            # for this machine's CPU
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES= python -m icl_lib.engine.fused_compile   # for AVX2

A process that first meets a kernel compiles it (about half a minute to two minutes per process on
a Zen 3 core, for each compile target) and writes it to numba's cache beside the kernels' source;
every later process loads it from there in a second or two.  ``make unit``, ``make test-fast`` and
``make nbval`` run this first, for both targets at once, so that the test workers, the worker
processes of the export and cluster tests and the chapters' kernels load the kernels instead of
each compiling them again.  It trains two tiny ensembles per precision (Adam and SGD, on one and on
two threads) and draws one batch again, which reaches every compiled signature the engine calls.
"""

from __future__ import annotations

import sys
import time

__all__ = ["compile_kernels", "main"]


def _target_runs_here() -> str | None:
    """Why the chosen compile target cannot run on this CPU, or ``None`` where it can."""
    from numba import config

    from .execution import fused_unavailable

    if config.CPU_NAME and config.CPU_NAME != "host":
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
        if config.CPU_NAME == "haswell" and not (features.get("avx2") and features.get("fma")):
            return "the haswell target needs AVX2 and FMA, which this CPU lacks"
    return fused_unavailable()  # not an x86-64 CPU, or numba cannot compile here


def compile_kernels() -> None:
    """Compile (or load) every kernel signature the fused backend calls: float32 and float64, Adam
    and SGD, the serial and the parallel step, and the batch drawn again (:meth:`FusedProgram.batch`)."""
    from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
    from .trainer import EnsembleTrainer

    for dtype in ("float32", "float64"):
        for optimizer, shards in (("adam", 1), ("sgd", 2)):
            tc = TrainConfig(steps=2, batch=8, n_log=2, val_size=8, dtype=dtype, optimizer=optimizer)
            specs = [RunSpec(DataConfig(d=2, L=3), ModelConfig(heads=h), tc, seed=s) for s, h in ((0, 1), (1, 2))]
            trainer = EnsembleTrainer(specs, "cpu", progress=False, backend="fused", shards=shards)
            trainer.run()
            trainer.stepper.program.batch(0)


def main(argv=None) -> int:
    from numba import config

    target = config.CPU_NAME or "this CPU"
    why = _target_runs_here()
    if why is not None:
        print(f"fused kernels for {target}: not compiled ({why})")
        return 0
    t0 = time.perf_counter()
    compile_kernels()
    print(f"fused kernels for {target}: ready in numba's cache ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
