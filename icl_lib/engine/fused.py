"""The fused CPU backend: one compiled loop per work item draws its sequences and runs the forward
and the analytic backward pass; a second applies the optimiser's rule to torch's optimiser state.

An eager CPU step is a few dozen PyTorch ops, each small (6 x 40 context tokens, 40 scores per
head), and its batch is drawn by ``normal_`` at about 4.7 ns a number; the fused step
(:mod:`icl_lib.engine.fused_kernels`) computes the same model, data distribution and loss with
its own counter-based random numbers at about 1 ns each (a Zen 3 core), with sequences as SIMD
lanes.  It
trains every model the book trains (softmax and linear attention, the normalised activations,
anisotropic and multi-task data, mixed head counts in one ensemble, float32 and float64; Adam and
SGD, the same :mod:`torch.optim` optimiser as the eager step, so checkpoints carry the same state).

Its random numbers are not the eager sampler's, so the backend is part of a run's cache key
(:meth:`icl_lib.config.RunSpec.key`) and of a stored run's provenance; a model's batch at step
``t`` is a function of its seed and ``t`` alone, so a checkpoint resumes bitwise from its step.
Work items (:data:`~icl_lib.engine.fused_random.CH` sequences of one model) are spread over
``threads`` threads and summed per model in a fixed order: the numbers do not depend on the
number of threads (tested).  Where the kernels cannot run (not an x86-64 CPU, or numba cannot
compile them), :func:`~icl_lib.engine.execution.resolve_backend` trains with the eager engine.
"""

from __future__ import annotations

import os
from typing import Sequence

import numba
import numpy as np
import torch

from ..config import RunSpec
from ..sampling import Batch, TaskSampler
from ..models import AttentionEnsemble
from ..seeding import derive_seed
from ..validate import check_int
from . import fused_kernels as K
from .fused_random import CH, XMODES, chunk_batch
from .forms import FormOptimizer
from .sources import BatchSource
from .steps import DivergenceWatch, _Step

__all__ = ["FusedProgram", "FusedStep", "FusedSource", "fused_keys", "SPIN_COUNT"]

SPIN_COUNT = "2000"  # GOMP_SPINCOUNT of numba's OpenMP threads: spins before sleeping between steps


def _start_threads() -> None:
    """Start numba's thread pool with idle threads that spin :data:`SPIN_COUNT` times before they
    sleep, unless the environment chooses (``GOMP_SPINCOUNT``, ``OMP_WAIT_POLICY``).  GNU OpenMP
    spins 300,000 times by default: enough to span a whole step of a small ensemble, so on a machine
    whose other core is busy a two-thread step waited for its spinning partner's time slices (one
    model trained at a fifth of its one-thread speed, measured); this short spin still spans the
    gap between two steps.  OpenMP reads the variable once, when numba loads it, which starting the
    pool does; the environment is restored after, so other processes are not affected."""
    chosen = "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ
    if not chosen:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        numba.get_num_threads()  # starts the pool
    finally:
        if not chosen:
            del os.environ["GOMP_SPINCOUNT"]


_start_threads()


def fused_keys(specs: Sequence[RunSpec]) -> np.ndarray:
    """Each model's Philox key ``(R, 2)`` uint32, from the seed of its data stream
    (:attr:`~icl_lib.config.RunSpec.stream_seed`) and the purpose ``train-fused``."""
    keys = np.empty((len(specs), 2), np.uint32)
    for r, s in enumerate(specs):
        k = derive_seed(s.stream_seed, "train-fused")
        keys[r] = (k & 0xFFFFFFFF, k >> 32)
    return keys


class FusedProgram:
    """The arrays a fused step of one ensemble reads and writes, built once.

    ``model``'s parameters are read in place (numpy views of the torch tensors) and its
    gradients written into ``p.grad`` tensors that stay the same objects from step to step.
    """

    def __init__(self, model: AttentionEnsemble, specs: Sequence[RunSpec], threads: int = 1,
                 sampler: TaskSampler | None = None):
        self.model, self.specs = model, list(specs)
        s0 = self.specs[0]
        self.B, self.L, self.d, self.N = s0.train.batch, s0.data.L, s0.data.d, s0.data.n_tasks
        self.threads = check_int("threads", threads, 1, 256)
        R, H, D = model.R, max(model.heads), model.D
        self.kind = K.ATTENTION_CODES[model.attention]
        self.norm_len = float(model.norm_length or 1)
        self.keys = fused_keys(self.specs)
        self.heads = np.asarray(model.heads, np.int64)
        dt = model.Q.detach().numpy().dtype
        # each model's task as the eager sampler holds it (noise, beta's scale on the supports, Sigma's Cholesky factor)
        if sampler is None:
            sampler = TaskSampler([s.data for s in self.specs], dtype=model.Q.dtype)
        self.noise_std = sampler.noise_std.numpy()
        self.beta_scale = sampler.beta_scale.numpy()
        self.chol = sampler.chol.numpy() if sampler.chol is not None else np.zeros((R, self.d, self.d), dt)
        gaussian = XMODES["covariance"] if sampler.chol is not None else XMODES["gaussian"]
        self.xmode = np.array([XMODES["sphere"] if c.covariates == "sphere" else gaussian for c in sampler.datas],
                              np.int64)  # how each model's covariates are drawn
        self.n_chunks = -(-self.B // CH)
        self.items = np.array([(r, c) for r in range(R) for c in range(self.n_chunks)], np.int64)
        n = len(self.items)
        self.item_loss = np.zeros(n, np.float64)
        self.item_gKQ = np.zeros((n, H, D, self.d), dt)
        self.item_gOV = np.zeros((n, H, self.N, D), dt)
        self.KQ = np.zeros((R, H, D, self.d), dt)
        self.OV = np.zeros((R, H, self.N, D), dt)
        self.loss = np.zeros(R, np.float64)
        self.params = [model.Q, model.K, model.V, model.O]
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        # numpy views of the parameters and gradients (a checkpoint load copies into them in place)
        self.views = [p.detach().numpy() for p in self.params], [p.grad.numpy() for p in self.params]
        self.use_threads()
        self.grads(0)  # compile (or load from numba's cache) before training starts; the gradients are rewritten

    def grads(self, step: int) -> torch.Tensor:
        """The models' losses ``(R,)`` on their step-``step`` batches; the gradients are in ``p.grad``."""
        (Q, Kp, V, O), (gQ, gK, gV, gO) = self.views
        run = K.step_grads if self.threads > 1 else K.step_grads_serial  # see step_grads_serial
        run(self.threads, self.items, step, self.keys, Q, Kp, V, O, self.heads, self.KQ, self.OV, self.chol,
            self.xmode, self.noise_std, self.beta_scale, self.kind, self.norm_len, self.B, self.L,
            self.n_chunks, self.item_loss, self.item_gKQ, self.item_gOV, self.loss, gQ, gK, gV, gO)
        return torch.from_numpy(self.loss.copy())

    def use_threads(self) -> None:
        """Give the calling thread's compiled loops :attr:`threads` threads (numba's setting is per
        calling thread)."""
        numba.set_num_threads(max(1, min(self.threads, numba.config.NUMBA_NUM_THREADS)))

    def batch(self, step: int) -> Batch:
        """The ensemble's step-``step`` batches as a :class:`~icl_lib.sampling.Batch` ``(R, B, ...)``: the
        sequences a fused step trains on, drawn again (tests, and the final training loss)."""
        R, dt = self.model.R, self.KQ.dtype
        probe = np.empty(1, dt)
        toks, betas = [], []
        for r in range(R):
            parts = [chunk_batch(self.keys[r, 0], self.keys[r, 1], step, c, self.chol[r], self.xmode[r],
                                 self.noise_std[r], self.beta_scale[r], self.d, self.N, self.L, probe)
                     for c in range(self.n_chunks)]
            toks.append(np.concatenate([t for t, _ in parts])[: self.B])
            betas.append(np.concatenate([b for _, b in parts])[: self.B])
        return Batch(torch.from_numpy(np.stack(toks)), torch.from_numpy(np.stack(betas)))


class FusedSource(BatchSource):
    """The batch source of a fused step: a step's batch is drawn inside the step from the step
    counter, so ``next(t)`` hands the step its counter and there is nothing to draw ahead, rewind or
    store beyond :class:`~icl_lib.engine.sources.BatchSource`'s defaults (the ``train``
    generators, which the fused step does not read, are stored as they are).  It runs no torch op,
    so it is not ``single_threaded``: torch's threads are the step's to set
    (:attr:`FusedStep.single_threaded`)."""

    def next(self, t: int) -> int:
        return t


class FusedStep(_Step):
    """One optimiser step of the ensemble from :class:`FusedProgram`'s gradients.

    The update is ``opt``'s own rule (:class:`torch.optim.Adam` without weight decay, or plain
    :class:`torch.optim.SGD`) applied by a compiled loop to the optimiser's own state tensors
    (``step``, ``exp_avg``, ``exp_avg_sq``), so a checkpoint holds the same state as an eager one;
    torch's own step costs about 100 microseconds, a third of a one-model step here.

    ``single_threaded`` (the trainer then gives torch one thread while it trains) unless the program
    runs on several threads and trains several models.  Then torch keeps its threads: the only torch
    op of the loop is the history's validation loss
    (:meth:`~icl_lib.engine.trainer.EnsembleTrainer.snapshot`), which then uses the cores the step
    uses.  Its numbers are the same on one thread and on several: torch splits a reduction with more
    than one output between threads along the outputs, so each model's mean is summed on one thread
    in one order, while a lone model's mean (one output) is split, and its last bits would depend
    on the threads (tested, both).
    """

    def __init__(self, program: FusedProgram, opt: torch.optim.Optimizer, watch: DivergenceWatch):
        self.program, self.opt, self.watch = program, opt, watch
        self.single_threaded = program.threads == 1 or program.model.R == 1
        self.limit = watch.limit.double().numpy()
        self.form = isinstance(opt, FormOptimizer)  # paper 1's form (3.1): its own step on the scales
        self.state: tuple | None = None  # flat views of the parameters, gradients and optimiser state
        if self.form:
            return
        group = opt.param_groups[0]
        self.adam = isinstance(opt, torch.optim.Adam)
        plain = (not group["weight_decay"] and not group["maximize"]
                 and (not group["amsgrad"] if self.adam else not group["momentum"]))
        if not plain:
            raise ValueError("opt is invalid: accepted Adam without weight decay, amsgrad or maximize, or plain SGD")

    def begin(self, until: int) -> None:
        self.program.use_threads()

    def reset(self) -> None:
        self.state = None  # a checkpoint load replaces the optimiser's state tensors

    def _state(self) -> tuple:
        if self.state is None:
            ps = tuple(p.detach().numpy().reshape(-1) for p in self.program.params)
            gs = tuple(p.grad.numpy().reshape(-1) for p in self.program.params)
            if not self.adam:
                self.state = ps, gs
                return self.state
            for p in self.program.params:
                st = self.opt.state[p]
                if not st:  # torch's own lazy initialisation of Adam's state
                    st["step"] = torch.tensor(0.0)
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            sts = [self.opt.state[p] for p in self.program.params]
            ms = tuple(st["exp_avg"].numpy().reshape(-1) for st in sts)
            vs = tuple(st["exp_avg_sq"].numpy().reshape(-1) for st in sts)
            count = tuple(st["step"].reshape(1).numpy() for st in sts)  # views of the step counts
            self.state = ps, gs, ms, vs, count
        return self.state

    def _update(self) -> None:
        if self.form:
            self.opt.step()
            return
        group = self.opt.param_groups[0]
        state = self._state()
        if self.adam:
            ps, gs, ms, vs, count = state
            b1, b2 = group["betas"]
            K.adam_update4(ps, gs, ms, vs, count, float(group["lr"]), float(b1), float(b2), float(group["eps"]))
        else:
            for p, g in zip(*state):
                K.sgd_update(p, g, float(group["lr"]))

    def __call__(self, t: int, _t: int | None = None) -> torch.Tensor:
        loss = self.program.grads(t)
        if not bool(np.all(self.program.loss <= self.limit)):  # NaN compares False: mark only then
            self.watch.mark(loss, t)
        self._update()
        return loss

    def final_loss(self, t: int) -> torch.Tensor:
        """The losses ``(R,)`` of the step-``t`` batches at the current parameters (no step)."""
        with torch.no_grad():
            return self.program.model.loss(self.program.batch(t))
