"""Where and how an ensemble trains, resolved once: device, draw-ahead, CUDA graphs, compilation.

:func:`icl_lib.train` resolves an :class:`Execution` once for all the ensembles it trains and
hands it to every :class:`~icl_lib.engine.trainer.EnsembleTrainer`; the trainer then only
builds the batch source and the step that the execution names (:mod:`icl_lib.engine.sources`,
:mod:`icl_lib.engine.steps`).

* ``draw_ahead`` -- steps whose batches are drawn at once: 1 on a CPU (one step's batch, drawn
  while the cores are busy anyway), :data:`GPU_DRAW_AHEAD` on a GPU, where a step is bound by
  kernel launches (one ``normal_`` launch per model and stream for that many steps instead of one
  per step).  It orders the random numbers, so a CUDA run's cache key names it.
* ``graph`` -- replay each step as a CUDA graph (CUDA only; ``ICL_CUDA_GRAPH=1`` turns it on for
  the chapters).
* ``compile`` -- ``torch.compile`` the loss (``"auto"``: on CUDA without graphs).
* ``backend`` -- on a CPU, ``"fused"`` (:mod:`icl_lib.engine.fused`: one compiled loop per group of
  sequences, its own counter-based random numbers; the default, :data:`DEFAULT_CPU_BACKEND`) or
  ``"eager"`` (PyTorch ops, the sampler's ``torch.Generator`` streams); a GPU trains eagerly.  It
  decides the random numbers, so a fused run's cache key names it.  ``ICL_BACKEND=eager|fused``
  sets ``"auto"`` for the chapters.  On a CPU the fused kernels are not built for (not x86-64), or
  where numba is missing or cannot compile them (:func:`fused_unavailable`), ``"fused"`` and
  ``"auto"`` resolve to ``"eager"`` with one logged line: the run trains, and is keyed, as an
  eager run.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
from dataclasses import dataclass

import torch

from ..config import DEVICES, resolve_device
from ..validate import check_choice, check_int

__all__ = ["Execution", "GPU_DRAW_AHEAD", "BACKENDS", "DEFAULT_CPU_BACKEND", "FUSED_MACHINES", "fused_unavailable",
           "cpu_description", "cpu_fields", "resolve_backend", "resolve_draw_ahead", "tune_cpu_allocator"]

log = logging.getLogger(__name__)

GPU_DRAW_AHEAD = 32  # steps whose batches a GPU draws at once; part of a CUDA run's cache key
BACKENDS = ("eager", "fused")  # how a CPU computes a step; part of a fused run's cache key
DEFAULT_CPU_BACKEND = "fused"  # 5.7-12.5x the eager step's model-steps/s on two cores here (README, Speed)
FUSED_MACHINES = ("x86_64", "amd64")  # the CPUs the fused kernels are built and tested for (AVX2, AVX-512)
_FALLBACK_LOGGED = False


@functools.lru_cache(maxsize=1)
def fused_unavailable() -> str | None:
    """Why the fused backend cannot train on this machine, in words, or ``None`` where it can: an
    x86-64 CPU on which numba compiles (or loads from its cache) the fused random numbers."""
    machine = platform.machine()
    if machine.lower() not in FUSED_MACHINES:
        return f"its kernels are built for x86-64 CPUs, and this one is {machine or 'of an unknown kind'}"
    try:
        from .fused_random import normals

        normals(0, 0, 0, 0, 2)
    except Exception as err:  # numba missing, or unable to compile here
        return f"its kernels do not compile here ({type(err).__name__}: {err})"
    return None


def cpu_fields() -> dict[str, str]:
    """The first processor's fields of Linux's ``/proc/cpuinfo`` (keys in lower case:
    ``"model name"``, ``"vendor_id"``, ...), or ``{}`` where there is none."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if not key and fields:
                    break  # the first processor's block is enough
                fields.setdefault(key, value.strip())
    except OSError:
        pass
    return fields


def _cpu_model() -> str:
    """The CPU's model name, with its family and model numbers where Linux gives them."""
    fields = cpu_fields()
    name = fields.get("model name") or fields.get("hardware") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name or "an unknown CPU"


def cpu_description() -> str:
    """This machine's CPU model, and the target numba compiles the fused kernels for (CPU name and
    vector instructions; ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` choose another), in words."""
    model = _cpu_model()
    try:
        import llvmlite.binding as llvm
        from numba.core import config
    except Exception:  # numba missing: the fused backend falls back to the eager engine
        return f"{model}; numba not available"
    name = config.CPU_NAME or llvm.get_host_cpu_name()
    if config.CPU_FEATURES == "":
        return f"{model}; fused kernels compiled for {name} (its own instruction set)"
    text = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    feats = {f[1:] for f in text.split(",") if f.startswith("+")}
    isa = next((label for key, label in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4.2", "SSE4.2"),
                                          ("neon", "NEON")) if key in feats), "no vector extension named")
    fma = ", FMA" if "fma" in feats else ""
    whose = "this CPU's" if config.CPU_FEATURES is None else "NUMBA_CPU_FEATURES'"
    return f"{model}; fused kernels compiled for {name} with {whose} instructions: {isa}{fma}"


def resolve_backend(backend: str, device: torch.device, here: bool = True) -> str:
    """``"auto"``: ``$ICL_BACKEND`` when set, else :data:`DEFAULT_CPU_BACKEND` on a CPU and
    ``"eager"`` on a GPU; ``"fused"`` is for CPUs only.  ``here``: the CPU is this machine's, so
    ``"fused"`` becomes ``"eager"`` where :func:`fused_unavailable` says why (logged once)."""
    global _FALLBACK_LOGGED
    if backend == "auto":
        env = os.environ.get("ICL_BACKEND", "")
        if env and env not in BACKENDS:
            raise ValueError(f"ICL_BACKEND={env!r} is invalid: accepted 'eager', 'fused' or unset (the environment variable)")
        backend = env or DEFAULT_CPU_BACKEND
        if torch.device(device).type != "cpu":
            return "eager"
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is invalid: accepted 'auto', 'eager' or 'fused'")
    if backend == "fused" and torch.device(device).type != "cpu":
        raise ValueError(f"backend='fused' is invalid on device {torch.device(device).type}: accepted only on cpu")
    why = fused_unavailable() if backend == "fused" and here else None
    if why is not None:
        if not _FALLBACK_LOGGED:
            _FALLBACK_LOGGED = True
            log.warning("icl_lib: the fused CPU backend cannot run on this machine (%s): training with the eager "
                        "engine instead", why)
        return "eager"
    return backend


def resolve_draw_ahead(draw_ahead: int | str, device: torch.device) -> int:
    """Steps whose batches are drawn at once: ``"auto"`` is 1 on a CPU and :data:`GPU_DRAW_AHEAD`
    on a GPU; an integer (or its command-line text) in [1, 4096] is taken as it is."""
    if draw_ahead == "auto":
        return GPU_DRAW_AHEAD if torch.device(device).type == "cuda" else 1
    if isinstance(draw_ahead, str):  # the command line's text
        if not draw_ahead.strip().isdigit():
            raise ValueError(f"draw_ahead={draw_ahead!r} is invalid: accepted 'auto' or an integer in [1, 4096]")
        draw_ahead = int(draw_ahead)
    return check_int("draw_ahead", draw_ahead, 1, 4096)


@dataclass(frozen=True)
class Execution:
    """A resolved placement of training: build it with :meth:`resolve`."""

    device: torch.device
    draw_ahead: int = 1  # steps whose batches are drawn at once
    graph: bool = False  # replay each step as a CUDA graph
    compile: bool = False  # torch.compile the loss
    backend: str = "eager"  # how a CPU computes a step: "eager" or "fused"

    @classmethod
    def given(cls, device, execution, **choices) -> "Execution":
        """``execution`` when it is given (an :class:`Execution`, used as it is), else one resolved
        from ``device`` and ``choices`` (:meth:`resolve`): exactly one of the two is named by the
        caller, so that neither is chosen for it (``device=None`` without an execution raises)."""
        if execution is None:
            if device is None:
                raise ValueError("device=None is invalid without an execution: accepted 'cpu', 'cuda' or "
                                 "'auto', or execution=an Execution (a chapter setup's)")
            return cls.resolve(device, **choices)
        if not isinstance(execution, Execution):
            raise ValueError(f"execution={execution!r} is invalid: accepted an Execution (Execution.resolve)")
        return execution

    @classmethod
    def resolve(
        cls, device, draw_ahead: int | str = "auto", graph: bool | None = False, compile: bool | str = "auto",
        backend: str = "auto", here: bool = True,
    ) -> "Execution":
        """Resolve ``"auto"`` choices for this machine and check the rest (``device``: ``"cpu"``,
        ``"cuda"`` or ``"auto"``, always named by the caller, or a ``torch.device`` resolved
        already, taken as it is).

        ``graph=None`` reads the environment variable ``ICL_CUDA_GRAPH`` (``1``: on, CUDA only).
        ``here=False`` resolves it for workers elsewhere (a Dask cluster's:
        :func:`~icl_lib.engine.cluster.train_on_dask`): a named device need not be present on this
        machine (``"auto"`` is still this machine's choice, and the environment read is this
        machine's); each worker resolves :meth:`settings` again, which checks its device.
        """
        if isinstance(device, torch.device):  # resolved already (a chapter setup's): used as it is
            dev = device
        elif here or device == "auto":
            dev = resolve_device(device)
        else:
            dev = torch.device(check_choice("device", device.type if isinstance(device, torch.device) else device,
                                            DEVICES))
        backend = resolve_backend(backend, dev, here)
        if graph is None:
            graph = dev.type == "cuda" and os.environ.get("ICL_CUDA_GRAPH", "0") == "1"
        if graph not in (True, False):
            raise ValueError(f"graph={graph!r} is invalid: accepted True or False")
        if graph and dev.type != "cuda":
            raise ValueError(f"graph=True is invalid on device {dev.type}: accepted only on cuda (CUDA graphs)")
        if compile == "auto":
            compile = dev.type == "cuda" and not graph
        draw = resolve_draw_ahead(draw_ahead, dev)
        if backend == "fused" and draw != 1:
            raise ValueError(f"draw_ahead={draw} is invalid with backend='fused': accepted 1 (it draws inside the step)")
        return cls(dev, draw, bool(graph), bool(compile) and not graph, backend)

    def settings(self) -> dict:
        """The keyword arguments of :meth:`resolve` that give this execution again, every choice
        made (what a Dask worker is sent: :func:`~icl_lib.engine.cluster.train_group`)."""
        return {"device": self.device.type, "draw_ahead": self.draw_ahead, "graph": self.graph,
                "compile": self.compile, "backend": self.backend}

    def run_key(self, spec) -> str:
        """The run-cache key of ``spec`` trained under this execution (:meth:`RunSpec.key` of its
        device type, draw-ahead and backend: all change the numbers).  :func:`~icl_lib.engine.training.train`,
        the plan and ``store export`` key runs, and so name ensemble checkpoints, with it."""
        return spec.key(self.device.type, self.draw_ahead, self.backend)


_ALLOCATOR_TUNED = False


def tune_cpu_allocator() -> None:
    """Keep MB-sized temporaries on glibc's heap instead of fresh ``mmap`` pages.

    Each training step allocates a few MB of short-lived tensors; by default glibc maps and unmaps
    them every step and the page faults cost about a quarter of a CPU step (measured with
    ``python -m icl_lib.tools.bench``).  Process-wide and harmless elsewhere; a no-op off glibc.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return
    _ALLOCATOR_TUNED = True
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
    libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    libc.mallopt(M_TRIM_THRESHOLD, 512 * 2**20)
    libc.mallopt(M_TOP_PAD, 64 * 2**20)
