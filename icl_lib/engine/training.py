"""Which runs train when and where: :func:`train`, the entry point of every chapter.

:func:`train` looks every requested :class:`~icl_lib.config.RunSpec` up in the run cache
(:mod:`icl_lib.engine.cache`), groups the missing ones by shape into ensembles, resolves the
:class:`~icl_lib.engine.execution.Execution` once for all of them, and trains them: on a CPU with
T threads an ensemble that costs more than 1/T of the work left trains alone on all threads
(split into shards), the others side by side, one single-threaded ensemble per thread, largest
first (:func:`schedule`).  Every result is stored in the cache as soon as its ensemble finishes;
a run that cannot be stored there (a full disk) is still returned, with one warning line.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Mapping, Sequence, TypeVar

import torch

from ..config import RunSpec
from ..validate import check_int
from .atomic import WriteFailed
from .cache import RunCache
from .execution import Execution
from .run import Run
from .store import RunStore
from .trainer import EnsembleTrainer

__all__ = ["train", "train_groups", "schedule", "group_chunks", "chunk_cost"]

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)


def chunk_cost(chunk: Sequence[str], todo: dict) -> float:
    """The relative cost of training the ensemble ``chunk`` (keys of ``todo``): models x steps x tokens x width."""
    s = todo[chunk[0]]
    return len(chunk) * s.train.steps * (s.data.L + 1) * (s.data.d + s.data.n_tasks)


def group_chunks(todo: dict[str, RunSpec], max_ensemble: int) -> list[list[str]]:
    """Run keys grouped by shape (:meth:`RunSpec.group_key`) into ensembles of at most ``max_ensemble``."""
    groups: dict[tuple, list[str]] = {}
    for key, s in todo.items():
        groups.setdefault(s.group_key(), []).append(key)
    return [group[i : i + max_ensemble] for group in groups.values() for i in range(0, len(group), max_ensemble)]


def schedule(chunks: list, todo: dict, dev: torch.device) -> tuple[list, list]:
    """Split ensembles into those trained one after another on all threads (``solo``, largest
    first) and those trained side by side, one single-threaded ensemble per thread (``together``).

    On a CPU with T threads an ensemble goes solo while it costs more than 1/T of the work left (it
    alone would keep the cores busy, split into shards); the rest run together, largest first.
    """
    threads = torch.get_num_threads() if dev.type == "cpu" else 1
    order = sorted(chunks, key=lambda c: chunk_cost(c, todo), reverse=True)
    if threads == 1 or len(order) == 1:
        return order, []
    solo = []
    while order and chunk_cost(order[0], todo) * threads > sum(chunk_cost(c, todo) for c in order):
        solo.append(order.pop(0))
    return solo, order


def _train_concurrently(chunks: list, train_chunk: Callable) -> None:
    """Run ``train_chunk(chunk, shards=1)`` for every chunk on a pool of single-threaded workers.

    A ``KeyboardInterrupt`` asks every worker to checkpoint and stop, then propagates.
    """
    stop = threading.Event()
    workers = min(torch.get_num_threads(), len(chunks))
    with ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = [pool.submit(train_chunk, c, 1, stop) for c in chunks]
        try:
            for f in futures:
                f.result()
        except BaseException:
            stop.set()
            for f in futures:
                f.cancel()
            raise


def _log_requests(keys: Sequence[str], specs: Sequence[RunSpec]) -> None:
    path = os.environ.get("ICL_RUN_LOG")
    if not path:
        return
    with open(path, "a") as fh:
        for key, s in zip(keys, specs):
            fh.write(json.dumps({"key": key, "spec": s.to_dict()}, sort_keys=True) + "\n")


def _execution(device, execution, graph, backend) -> Execution:
    """The :class:`Execution` of :func:`train`: ``execution`` as it is, or resolved from ``device``
    (exactly one of them; neither is chosen for the caller)."""
    if execution is None:
        return Execution.given(device, None, graph=graph, backend=backend)
    if (device, graph, backend) != (None, None, "auto"):
        raise ValueError(f"device={device!r}, graph={graph!r}, backend={backend!r} are invalid with an execution: "
                         "accepted their defaults (the execution holds them)")
    return Execution.given(None, execution)


def train(
    specs: Sequence[RunSpec],
    device: str | None = None,
    cache: bool = True,
    progress=True,
    max_ensemble: int = 64,
    graph: bool | None = None,
    checkpoint_every: float = 60.0,
    use_store: bool = True,
    checkpoint_dir: str | os.PathLike | None = None,
    on_trained: Callable[[list[Run]], None] | None = None,
    backend: str = "auto",
    execution: Execution | None = None,
) -> list[Run]:
    """Train (or load from the run cache, or from the run store) every spec; returns one
    :class:`Run` per spec, in order.  ``use_store``: look runs up in the committed run store
    (:mod:`icl_lib.engine.store`) too.

    Runs missing from the cache are grouped by shape into ensembles of at most ``max_ensemble``
    models; on a CPU, small ensembles train side by side, one per thread (:func:`schedule`).
    With ``cache=True`` a run in progress checkpoints into the cache folder and resumes there if
    interrupted (``checkpoint_dir``: in that folder instead); two processes asking for the same
    runs train them once (the second waits on a file lock, then loads).  ``on_trained`` is called
    with the runs of each ensemble as soon as it has trained (from its worker thread).  ``graph``
    captures each step as a CUDA graph (GPU only; ``None``: when the environment variable
    ``ICL_CUDA_GRAPH`` is ``1``).  ``backend``: how a CPU computes a step, ``"fused"`` or
    ``"eager"`` (``"auto"``: :func:`~icl_lib.engine.execution.resolve_backend`).  Where the runs train is
    always named: ``execution``, an :class:`~icl_lib.engine.execution.Execution` resolved already
    (a chapter setup's), used as it is (``device``, ``graph`` and ``backend`` then keep their
    defaults), or ``device`` (``"cpu"``, ``"cuda"`` or ``"auto"``, resolved here with ``graph``
    and ``backend``).
    ``progress``: ``True`` shows a bar per ensemble, a callable is called with the number of models
    after every step.

    With the environment variable ``ICL_RUN_LOG`` set to a file, every requested run's key and
    spec are appended to it as JSON lines (what a process asked for: the book's plan is tested
    against what its chapters train with it, :mod:`icl_lib.book.plan`).

    A trained run that cannot be written to the run cache (a full disk: the cache's
    :class:`~icl_lib.engine.atomic.WriteFailed`) is not lost: it is returned like the others, and
    one warning line of the logger ``icl_lib.engine.training`` says how many runs were not cached,
    naming the first file and why; their ensemble's checkpoint is kept, so a later call resumes
    there instead of from step 0.  An error of ``on_trained`` (the run store's, for ``store
    export``) propagates; the runs of that ensemble are in the cache by then, if it could write them.
    """
    specs = list(specs)
    for k, s in enumerate(specs):
        if not isinstance(s, RunSpec):
            raise ValueError(f"specs[{k}]={s!r} is invalid: accepted a RunSpec")
    max_ensemble = check_int("max_ensemble", max_ensemble, 1)
    ex = _execution(device, execution, graph, backend)
    keys = [ex.run_key(s) for s in specs]
    _log_requests(keys, specs)
    run_cache = RunCache() if cache else None
    found: dict[str, Run] = {}
    if run_cache is not None:
        for key in set(keys):
            run = run_cache.load(key)
            if run is not None:
                found[key] = run
    if use_store:  # runs trained elsewhere (a GPU's paper profile), keyed by spec and model code
        runs_store = RunStore()
        for key, s in zip(keys, specs):
            if key not in found:
                run = runs_store.load(s)
                if run is not None:
                    found[key] = run
    todo = {key: s for key, s in zip(keys, specs) if key not in found}
    chunks = group_chunks(todo, max_ensemble)
    unsaved: list[WriteFailed] = []  # runs trained but not cached (list.append: safe from the threads)

    def train_chunk(chunk: list[str], shards: int | None = None, stop=None) -> None:
        if run_cache is None:
            runs = EnsembleTrainer([todo[k] for k in chunk], progress=progress, shards=shards, execution=ex,
                                   checkpoint_every=checkpoint_every).run(stop=stop)
            found.update(zip(chunk, runs))
            if on_trained is not None:
                on_trained(runs)
            return
        with run_cache.locked(chunk):
            missing = []
            for k in chunk:
                run = run_cache.load(k)
                if run is None:
                    missing.append(k)
                else:
                    found[k] = run
            if not missing:
                return
            ckpt = run_cache.checkpoint_path(missing, checkpoint_dir)
            trainer = EnsembleTrainer(
                [todo[k] for k in missing], checkpoint=ckpt, checkpoint_every=checkpoint_every, progress=progress,
                shards=shards, execution=ex,
            )
            runs = trainer.run(stop=stop)
            failed = 0
            for k, run in zip(missing, runs):
                found[k] = run
                try:
                    run_cache.save(k, run)
                except WriteFailed as err:
                    unsaved.append(err)
                    failed += 1
            if not failed:  # else a later call resumes from the checkpoint, not from step 0
                ckpt.unlink(missing_ok=True)
        if on_trained is not None:
            on_trained(runs)

    solo, together = schedule(chunks, todo, ex.device)
    try:
        for chunk in solo:
            train_chunk(chunk)
        if together:
            _train_concurrently(together, train_chunk)
    finally:
        if unsaved:
            log.warning("icl_lib run cache: %d trained runs could not be cached, the first because %s; they "
                        "are returned, and a later call trains them again (from their checkpoint, if one was "
                        "written)", len(unsaved), unsaved[0])
    return [found[key] for key in keys]


def train_groups(groups: Mapping[K, Sequence[RunSpec]], device: str | None = None, **options) -> dict[K, list[Run]]:
    """Train (or load) the runs of ``{key: [RunSpec, ...]}`` (a chapter setup's declaration, e.g.
    ``{H: runs}`` of a head sweep) in one :func:`train` call, group after group; returns
    ``{key: [Run, ...]}`` in the same order.  ``device`` and ``options``: those of :func:`train`
    (a chapter passes its setup's ``execution``)."""
    groups = {k: list(v) for k, v in groups.items()}
    runs = iter(train([s for group in groups.values() for s in group], device=device, **options))
    return {k: [next(runs) for _ in group] for k, group in groups.items()}
