"""Where a training step's batch comes from: one batch source per way of drawing it.

Every model draws its data from its own generators (:mod:`icl_lib.seeding`), so a batch source
only decides *when* the numbers are drawn, never which ones: all sources give a model the same
batches, in the same order (tested).  Each can tell a checkpoint the generator states from which
the next unused batch is drawn, so a resumed run continues with the numbers of an uninterrupted
one.

* :class:`PlainSource`    -- draw this step's batch into a reused buffer (the default);
* :class:`PrefetchSource` -- a lone model on a multi-core CPU: draw the next step's batch in a
  second thread while this step computes;
* :class:`AheadSource`    -- a GPU: draw the batches of ``K`` steps at once (one ``normal_`` launch
  per model and stream), then hand them out one step at a time;
* :class:`ShardSource`    -- a CPU ensemble split into shards: each shard draws its slice of the
  batch in the thread that computes its gradients (:class:`~icl_lib.engine.steps.ShardedStep`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Callable, Sequence

import torch

from ..sampling import Batch, TaskSampler

__all__ = [
    "BatchSource",
    "PlainSource",
    "PrefetchSource",
    "AheadSource",
    "ShardSource",
    "generator_states",
    "set_generator_states",
]


def generator_states(generators: Sequence[Sequence[torch.Generator]]) -> list:
    """Every model's generator states (to rewind them to before a batch drawn ahead, or to save)."""
    return [[g.get_state() for g in gens] for gens in generators]


def set_generator_states(generators: Sequence[Sequence[torch.Generator]], states: list) -> None:
    """Set states from :func:`generator_states`.

    A generator's state is a CPU byte tensor whatever the generator's device (a CUDA generator
    refuses any other), while a checkpoint loaded with ``map_location="cuda"`` holds it on the GPU.
    """
    for gens, sts in zip(generators, states):
        for g, st in zip(gens, sts):
            g.set_state(st.cpu())


class BatchSource:
    """Draws each training step's batch of an ensemble from the models' own generators.

    ``begin(until)`` starts a stretch of training up to step ``until`` (exclusive) and ``close()``
    ends it; ``next(t)`` is step ``t``'s batch.  ``checkpoint_states(step)`` gives the generator
    states a checkpoint taken before step ``step`` stores (those from which the next unused batch
    is drawn), ``rewind()`` puts the generators there (call it before saving), ``reset()`` forgets
    anything drawn ahead (after the generators were set from a checkpoint).  ``single_threaded``:
    the calling thread trains with one intra-op thread while the source is in use.
    """

    single_threaded = False

    def __init__(self, sampler: TaskSampler, generators: list, batch: int):
        self.sampler, self.generators, self.batch = sampler, generators, batch

    def begin(self, until: int) -> None:
        """Training runs to step ``until`` (exclusive) from now on."""

    def next(self, t: int):
        raise NotImplementedError

    def checkpoint_states(self, step: int) -> list:
        return generator_states(self.generators)

    def rewind(self) -> None:
        """Nothing drawn ahead: the generators already stand before the next batch."""

    def reset(self) -> None:
        """Nothing drawn ahead to forget."""

    def close(self) -> None:
        self.rewind()


class PlainSource(BatchSource):
    """Draw step ``t``'s batch when it is asked for, into ``buffer`` ``(R, B, P)``; the batch returned
    is always :attr:`static`, the views of that buffer (a CUDA graph reads them in place)."""

    def __init__(self, sampler: TaskSampler, generators: list, batch: int, buffer: torch.Tensor):
        super().__init__(sampler, generators, batch)
        self.buffer = buffer
        self.static = sampler.views(buffer)

    def next(self, t: int) -> Batch:
        return self.sampler.sample(self.batch, self.generators, out=self.buffer)


class PrefetchSource(BatchSource):
    """A lone model on a multi-core CPU: while step ``t`` computes, step ``t + 1``'s batch is drawn
    in a second thread (both single-threaded) into a spare buffer.  Before a checkpoint,
    :meth:`rewind` waits for that draw and rewinds the generators to before it, so the numbers are
    those of a one-thread loop (tested, also across checkpoints and interrupts)."""

    single_threaded = True

    def __init__(self, sampler: TaskSampler, generators: list, batch: int, buffer: torch.Tensor):
        super().__init__(sampler, generators, batch)
        self.buffer, self.spare = buffer, torch.empty_like(buffer)
        self.pool: ThreadPoolExecutor | None = None
        self.pending: tuple[Future, list] | None = None  # the next batch being drawn, states before it
        self.until = 0

    def begin(self, until: int) -> None:
        self.until = until
        self.pool = ThreadPoolExecutor(1, initializer=torch.set_num_threads, initargs=(1,))

    def next(self, t: int) -> Batch:
        if self.pending is not None:
            batch = self.pending[0].result()
            self.pending = None
            self.buffer, self.spare = self.spare, self.buffer  # the prefetched buffer is now this step's
        else:
            batch = self.sampler.sample(self.batch, self.generators, out=self.buffer)
        if t + 1 < self.until:
            states = generator_states(self.generators)
            job = self.pool.submit(self.sampler.sample, self.batch, self.generators, out=self.spare, parallel=False)
            self.pending = (job, states)
        return batch

    def rewind(self) -> None:
        """Wait for a batch drawn ahead and rewind the generators to before it."""
        if self.pending is not None:
            job, states = self.pending
            self.pending = None
            job.exception()  # wait; an error there is the next draw's to raise
            set_generator_states(self.generators, states)

    def close(self) -> None:
        self.rewind()  # an error mid-step: leave the generators at this step
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


class AheadSource(BatchSource):
    """Draw the batches of ``K`` steps at once into ``chunk`` ``(R, K, B, P)`` (one ``normal_`` call
    per model and stream for all of them), then copy step ``t``'s slice into ``buffer`` (the static
    batch a CUDA graph reads).  A checkpoint inside a block stores the generator states from
    before the block, and the resumed run draws the block again (tested)."""

    def __init__(self, sampler: TaskSampler, generators: list, batch: int, buffer: torch.Tensor, K: int):
        super().__init__(sampler, generators, batch)
        self.buffer, self.K = buffer, K
        self.static = sampler.views(buffer)
        self.chunk = torch.empty(buffer.shape[0], K, *buffer.shape[1:], device=buffer.device, dtype=buffer.dtype)
        self.chunk_at: int | None = None  # first step the chunk holds (None: none)
        self.pre_chunk: list | None = None  # the generator states before the chunk

    def next(self, t: int) -> Batch:
        k = t % self.K
        if self.chunk_at != t - k:
            self.pre_chunk = generator_states(self.generators)
            self.sampler.sample(self.batch, self.generators, out=self.chunk, steps=self.K)
            self.chunk_at = t - k
        self.buffer.copy_(self.chunk[:, k])
        return self.static

    def checkpoint_states(self, step: int) -> list:
        """With a block of batches not all used by ``step`` (the next step to train): the states
        from before the block, so that a resumed run draws it again."""
        if self.chunk_at is not None and step < self.chunk_at + self.K:
            return [[st.clone() for st in states] for states in self.pre_chunk]
        return generator_states(self.generators)

    def reset(self) -> None:
        self.chunk_at = self.pre_chunk = None


class ShardSource(BatchSource):
    """A CPU ensemble in shards: step ``t``'s batch is one draw per shard, called by the shard's
    thread inside :class:`~icl_lib.engine.steps.ShardedStep` (each shard samples its models'
    slice single-threaded, into its own buffer)."""

    def __init__(self, sampler: TaskSampler, generators: list, batch: int, shards: Sequence):
        super().__init__(sampler, generators, batch)
        self.draws: list[Callable[[], Batch]] = [
            partial(sh.sampler.sample, batch, sh.generators, out=sh.buffer, parallel=False) for sh in shards
        ]

    def next(self, t: int) -> list[Callable[[], Batch]]:
        return self.draws
