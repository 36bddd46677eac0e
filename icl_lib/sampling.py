"""Samplers for in-context linear regression (paper 1, Section 2; anisotropic B.3; multi-task B.4).

A sequence is ``L`` demonstrations ``(x_i, y_i)`` and a query ``x_q`` with target ``y_q``:

    x_i, x_q ~ N(0, Sigma),  beta_n ~ N(0, I / |S_n|) on S_n,  y_{i,n} = beta_n^T x_i + eps,
    eps ~ N(0, sigma2).

Every call draws fresh sequences from ``torch.Generator`` objects, so a run is reproducible from its
seed.  The training engine draws an ensemble of R models' batches at once: each model owns
``STREAMS`` generators, stream ``s`` filling a fixed slice of the batch, so the numbers a model sees
do not depend on how many models share the ensemble or on how many threads fill the buffer.
Used by every chapter (chapter 1 introduces it).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, NamedTuple, Sequence

import torch

from .config import DataConfig
from .seeding import generator as seeded
from .validate import check_int

__all__ = ["Batch", "TaskSampler", "sample_batch", "sample_chunks"]


class Batch(NamedTuple):
    """A batch of sequences stored as token matrices; leading dims ``(...)`` are ``(B,)`` or ``(R, B)``.

    ``tokens`` is feature-major, ``(..., D, L + 1)`` with ``D = d + N``: column ``i < L`` is the
    context token ``z_i = (x_i, y_i)``, the last column holds ``(x_q, y_q)`` (the model never reads
    ``y_q``: its query token is ``(x_q, 0)``).  The properties give the usual views.
    """

    tokens: torch.Tensor  # (..., D, L+1) rows x_1..x_d then y_1..y_N; columns z_1..z_L, then the query
    beta: torch.Tensor  # (..., N, d) task vectors (zero off each task's support)

    @property
    def d(self) -> int:
        return self.beta.shape[-1]

    @property
    def L(self) -> int:
        return self.tokens.shape[-1] - 1

    @property
    def context(self) -> torch.Tensor:
        """``(..., D, L)``: the context tokens as columns (the model's ``Z_ctx``)."""
        return self.tokens[..., :-1]

    @property
    def x(self) -> torch.Tensor:
        """``(..., L, d)`` demonstrations' covariates ``x_i`` (a view)."""
        return self.tokens[..., : self.d, :-1].transpose(-1, -2)

    @property
    def y(self) -> torch.Tensor:
        """``(..., L, N)`` demonstrations' labels ``y_i`` (a view)."""
        return self.tokens[..., self.d :, :-1].transpose(-1, -2)

    @property
    def xq(self) -> torch.Tensor:
        """``(..., d)`` query covariates ``x_q``."""
        return self.tokens[..., : self.d, -1]

    @property
    def yq(self) -> torch.Tensor:
        """``(..., N)`` query targets ``y_q``."""
        return self.tokens[..., self.d :, -1]

    @classmethod
    def from_arrays(cls, x, y, xq, yq, beta=None) -> "Batch":
        """Build a batch from ``x (.., L, d)``, ``y (.., L, N)``, ``xq (.., d)``, ``yq (.., N)``."""
        ctx = torch.cat([x, y], -1)  # (.., L, D)
        query = torch.cat([xq, yq], -1)[..., None, :]  # (.., 1, D)
        tokens = torch.cat([ctx, query], -2).transpose(-1, -2).contiguous()
        if beta is None:
            beta = torch.full((*xq.shape[:-1], y.shape[-1], x.shape[-1]), float("nan"), dtype=x.dtype, device=x.device)
        return cls(tokens, beta)

    def member(self, r: int) -> "Batch":
        """Model ``r``'s part of an ensemble batch."""
        return Batch(self.tokens[r], self.beta[r])

    def to(self, *args, **kw) -> "Batch":
        return Batch(self.tokens.to(*args, **kw), self.beta.to(*args, **kw))


_POOL: ThreadPoolExecutor | None = None
_THREADS = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))  # at import: training may lower torch's count


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=_THREADS)
    return _POOL


def _fill_normal(view: torch.Tensor, gen: torch.Generator) -> None:
    view.normal_(generator=gen)


def _run_jobs(fn, jobs: list) -> None:
    """Run ``fn(*job)`` for every job; CPU work is spread over a small thread pool (torch releases
    the GIL), each job touching only its own slice and generator, so the result is deterministic."""
    workers = _pool()._max_workers
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            fn(*job)
        return

    def run(chunk):
        for job in chunk:
            fn(*job)

    chunks = [jobs[w::workers] for w in range(workers)]
    futures = [_pool().submit(run, c) for c in chunks[1:]]
    run(chunks[0])
    for f in futures:
        f.result()


class TaskSampler:
    """Draws batches for R models at once, each with its own task (covariance, noise, supports).

    All ``datas`` must share ``d`` and the number of tasks; ``L`` may be overridden per call
    (length generalisation, chapter 5).  ``sample`` takes one list of generators per model.
    """

    def __init__(self, datas: Sequence[DataConfig], device="cpu", dtype=torch.float32):
        datas = list(datas)
        if not datas:
            raise ValueError("datas=[] is invalid: accepted at least one DataConfig")
        d, n = datas[0].d, datas[0].n_tasks
        for k, c in enumerate(datas):
            if (c.d, c.n_tasks) != (d, n):
                raise ValueError(
                    f"datas[{k}] has d={c.d}, tasks={c.n_tasks}: accepted the same d={d} and tasks={n} for every model"
                )
        self.datas, self.d, self.n_tasks = datas, d, n
        self.L = datas[0].L
        self.device, self.dtype = torch.device(device), dtype
        R = len(datas)
        # per-model transforms, shapes noted
        self.noise_std = torch.tensor([c.sigma2**0.5 for c in datas], dtype=dtype, device=self.device)  # (R,)
        masks = torch.stack([c.support_mask() for c in datas])  # (R, N, d)
        self.beta_scale = (masks / masks.sum(-1, keepdim=True).sqrt()).to(self.device, dtype)  # (R, N, d)
        isotropic = all(c.covariance is None and c.rho == 0.0 for c in datas)
        self.chol = None  # (R, d, d) Cholesky factors C of Sigma = C C^T, None when isotropic
        if not isotropic:
            chol = torch.stack([torch.linalg.cholesky(c.covariance_matrix()) for c in datas])
            self.chol = chol.to(self.device, dtype)
        self.R = R
        sphere = [c.covariates == "sphere" for c in datas]
        # (R, 1, 1, 1) 1 for the models whose covariates lie on the sphere of radius sqrt(d); None if none does
        self.sphere = torch.tensor(sphere, device=self.device).view(R, 1, 1, 1) if any(sphere) else None

    def numbers_per_sequence(self, L: int | None = None) -> int:
        L = self.L if L is None else L
        return (self.d + self.n_tasks) * (L + 1) + self.n_tasks * self.d

    def sample(
        self,
        batch: int,
        generators: Sequence[Sequence[torch.Generator]],
        L: int | None = None,
        out: torch.Tensor | None = None,
        parallel: bool = True,
        steps: int = 1,
    ) -> Batch:
        """Fresh ``(R, batch, ...)`` sequences; model ``r`` draws from ``generators[r]``.

        ``generators[r]`` holds S generators; generator ``s`` fills the ``s``-th contiguous slice
        of the model's batch.  ``out`` is an optional ``(R, batch, P)`` buffer reused between calls
        (the returned tensors then are views of it).  Per sequence the buffer holds
        ``[x^T (d, L+1) | eps -> y (N, L+1) | beta (N, d)]``, so the token matrix is a view.
        ``parallel=False`` draws in the calling thread only (the training engine's shards, which
        already run one per core).  The numbers do not depend on it.

        ``steps > 1`` draws the batches of that many training steps at once (the engine's
        draw-ahead on a GPU, one ``normal_`` call per model and stream for all of them): the
        buffer is then ``(R, steps, batch, P)``, generator ``s`` fills slice ``s`` of every step's
        batch, and the returned tensors are ``(R, steps, batch, ...)``.  ``steps = 1`` gives the
        numbers of the plain call.
        """
        batch = check_int("batch", batch, 1)
        steps = check_int("steps", steps, 1)
        L = self.L if L is None else check_int("L", L, 1)
        if len(generators) != self.R:
            raise ValueError(f"generators has {len(generators)} entries: accepted one list per model (R={self.R})")
        R = self.R
        P = self.numbers_per_sequence(L)
        shape = (R, batch, P) if steps == 1 else (R, steps, batch, P)
        if out is None or out.shape != shape:
            out = torch.empty(shape, device=self.device, dtype=self.dtype)
        jobs = []
        for r, gens in enumerate(generators):
            S = len(gens)
            bounds = [batch * s // S for s in range(S + 1)]
            for s, g in enumerate(gens):
                a, b = bounds[s], bounds[s + 1]
                if b > a:  # stream s fills rows a:b of the batch (of every step's batch)
                    jobs.append((out[r, a:b] if steps == 1 else out[r, :, a:b], g))
        # Only the normal_ calls run on the thread pool: each is one long call that releases the
        # GIL.  The transforms below are a few ops over the whole ensemble in this thread (small
        # ops spread over threads would queue on the GIL instead of running in parallel).
        if parallel and self.device.type == "cpu":
            _run_jobs(_fill_normal, jobs)
        else:
            for job in jobs:
                _fill_normal(*job)
        if steps == 1:
            return self._transform(out, L)
        self._transform(out.view(R, steps * batch, P), L)
        return self.views(out, L)

    def views(self, out: torch.Tensor, L: int | None = None) -> Batch:
        """The :class:`Batch` whose tensors are views of a sampled buffer ``(R, [steps,] batch, P)``."""
        L = self.L if L is None else L
        d, N = self.d, self.n_tasks
        D, T = d + N, L + 1
        tokens = out[..., : D * T].unflatten(-1, (D, T))  # (R, [K,] B, D, L+1)
        beta = out[..., D * T :].unflatten(-1, (N, d))  # (R, [K,] B, N, d)
        return Batch(tokens, beta)

    def _transform(self, flat: torch.Tensor, L: int) -> Batch:
        """Turn the standard normals of ``flat (R, n, P)`` into sequences of each model's task, in
        place; returns the batch of views of ``flat``."""
        d = self.d
        tokens, beta = self.views(flat, L)
        xT, yT = tokens[:, :, :d], tokens[:, :, d:]  # (R, n, d, L+1) covariates, (R, n, N, L+1) noise for now
        if self.chol is not None:
            xT.copy_(self.chol[:, None] @ xT)  # x = C z ~ N(0, C C^T)
        if self.sphere is not None:  # x = sqrt(d) z / |z|: uniform on the sphere, E x x^T = I
            scale = d**0.5 / xT.norm(dim=-2, keepdim=True)  # (R, n, 1, L+1)
            xT.mul_(torch.where(self.sphere, scale, torch.ones_like(scale)))
        beta.mul_(self.beta_scale[:, None])
        yT.mul_(self.noise_std[:, None, None, None])
        for k in range(d):  # y_n = beta_n^T x + eps_n, one covariate row at a time
            yT.addcmul_(xT[:, :, k : k + 1, :], beta[:, :, :, k : k + 1])
        return Batch(tokens, beta)


def sample_batch(
    data: DataConfig,
    batch: int,
    generator: torch.Generator | int = 0,
    L: int | None = None,
    device="cpu",
    dtype=torch.float64,
) -> Batch:
    """``batch`` fresh sequences of one task, shapes ``(batch, ...)``; ``generator`` or an int seed.

    The convenience sampler of the chapters (evaluation sets, Monte Carlo risks).
    """
    gen = generator if isinstance(generator, torch.Generator) else seeded(generator, "test", device=device)
    return TaskSampler([data], device=device, dtype=dtype).sample(batch, [[gen]], L=L).member(0)


def sample_chunks(
    data: DataConfig, n: int, seed: int = 0, chunk: int = 20_000, L: int | None = None, dtype=torch.float64
) -> Iterator[Batch]:
    """``n`` fresh sequences of one task as batches of at most ``chunk``, all drawn from one
    generator derived from ``seed`` (the Monte Carlo risks and gaps of chapters 1-7); with
    ``n <= chunk`` the one batch is :func:`sample_batch`'s for that seed."""
    gen = seeded(seed, "test")
    done = 0
    while done < n:
        m = min(chunk, n - done)
        yield sample_batch(data, m, gen, L=L, dtype=dtype)
        done += m
