"""Training the book's plan: into the run cache as few large ensembles, or into the committed run store.

* :func:`train_plan`   -- trains the whole plan into the run cache as few large ensembles (runs of
  all chapters that share a shape train together), resumable from its checkpoints, with one
  progress bar for the whole plan, here or on a Dask cluster (:mod:`icl_lib.engine.cluster`);
* :func:`store_plan`   -- trains (or takes from the run cache) every run missing from the run store
  with its early checkpoint (:data:`EARLY_STEP`), in spawned processes;
* :func:`store_summary` -- per chapter, what the run store holds of its runs.

The plan is :mod:`icl_lib.book.plan`'s.  Command line: ``python -m icl_lib train-plan`` and
``python -m icl_lib store``.
"""

from __future__ import annotations

import os
import threading

import torch

from ..config import RunSpec
from ..engine.atomic import WriteFailed
from ..engine.cache import RunCache
from ..engine.execution import Execution
from ..engine.run import Run
from ..engine.training import chunk_cost, group_chunks, train
from ..engine.store import RunStore, early_twin, experiment_key
from ..validate import check_choice, check_int
from .plan import unique_specs

__all__ = ["train_plan", "store_plan", "store_summary", "EARLY_STEP"]

EARLY_STEP = 2000  # the stored early checkpoint of a paper-profile run (its integrity test retrains to it)


class _PlanBar:
    """One tqdm bar over every model-step of a plan, updated from the training threads."""

    def __init__(self, total: int, enabled: bool):
        self.lock = threading.Lock()
        self.bar = None
        if enabled and total:
            from tqdm.auto import tqdm  # only when a bar is shown

            self.bar = tqdm(total=total, unit="model-step", unit_scale=True, desc="train-plan", smoothing=0.05)

    def __call__(self, models: int) -> None:
        if self.bar is not None:
            with self.lock:
                self.bar.update(models)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def train_plan(plan: dict[str, list[RunSpec]], device: str = "auto", progress: bool = True,
               checkpoint_every: float = 60.0, max_ensemble: int = 64, executor: str = "local",
               scheduler: str | None = None, workers: int = 2, backend: str = "auto") -> dict[str, list[Run]]:
    """Train every run of ``plan`` missing from the run cache as the largest shape-compatible
    ensembles (runs of all chapters pack together), side by side where that keeps the cores busy;
    an interrupted or killed plan resumes from its checkpoints (every ``checkpoint_every``
    seconds) to the numbers of an uninterrupted one.  ``executor="dask"`` sends each ensemble to a
    Dask cluster instead (:func:`icl_lib.engine.cluster.train_on_dask`: ``scheduler`` an address,
    or ``None`` for a local cluster of ``workers`` processes).  ``backend``: how a CPU computes a
    step (:func:`~icl_lib.engine.execution.resolve_backend`).  Both executors train the same
    execution (``device``, ``backend``, and ``ICL_CUDA_GRAPH`` of this environment), and key the
    runs with it.  Returns ``{chapter: runs}``."""
    check_choice("executor", executor, ("local", "dask"))
    ex = Execution.resolve(device, graph=None, backend=backend, here=executor == "local")
    specs = unique_specs(plan)
    cache = RunCache()
    left = sum(s.train.steps for s in specs if not cache.path(ex.run_key(s)).exists())
    bar = _PlanBar(left, progress)
    try:
        if executor == "dask":
            from ..engine.cluster import train_on_dask  # Dask is optional: imported only for it

            runs = train_on_dask(specs, scheduler=scheduler, workers=workers, max_ensemble=max_ensemble,
                                 progress=bar if bar.bar is not None else None, **ex.settings())
        else:
            runs = train(specs, execution=ex, progress=bar if bar.bar is not None else False,
                         max_ensemble=max_ensemble, checkpoint_every=checkpoint_every)
    finally:
        bar.close()
    by_spec = dict(zip(specs, runs))
    return {chapter: [by_spec[s] for s in chapter_specs] for chapter, chapter_specs in plan.items()}


def store_plan(plan: dict[str, list[RunSpec]], early_step: int = EARLY_STEP, device: str = "auto",
               store: RunStore | None = None, command: str = "", progress: bool = True,
               max_ensemble: int = 64, checkpoint_every: float = 60.0, processes: int = 1,
               backend: str = "auto") -> dict:
    """Train (or take from the run cache) every run of ``plan`` missing from the run store, with
    its early twin (the same spec stopped at ``early_step``, so its parameters are the run's own
    at that step), and write them to the store with their provenance (``make paper-runs``).

    The runs train as shape-compatible ensembles of at most ``max_ensemble`` models (on a CPU, as
    many side by side as it has threads, one per thread, each thread taking the next ensemble
    when its own ends), and each ensemble is written to the store as soon as it ends: an export
    stopped at any point keeps what it finished.  The ensembles in training checkpoint every
    ``checkpoint_every`` seconds into the store's ``ckpt/`` folder (:attr:`RunStore.checkpoint_dir`),
    so the checkpoints can be committed with the store and a later export on the same kind of
    device resumes them (a CPU's data streams are not a GPU's: each device kind has its own
    checkpoints).  ``processes > 1`` on a CPU trains the ensembles in that many worker processes
    instead, one single-threaded ensemble each, each taking the next ensemble (largest first)
    when its own is stored (:func:`_export_in_processes`): the same ensembles, checkpoints and
    numbers, without the threads of one process contending for its interpreter.  ``backend``: how
    a CPU computes a step (a run's provenance names it).  A store that cannot be written (a full
    disk) raises :class:`~icl_lib.engine.atomic.WriteFailed` naming the file; the runs trained are
    in the run cache then (or, if it is full too, in their checkpoints), so the same export, run
    again with room, stores them without training them again.  Returns :meth:`RunStore.status` of the plan."""
    store = store or RunStore()
    max_ensemble = check_int("max_ensemble", max_ensemble, 1)
    processes = check_int("processes", processes, 1, 256)
    specs = unique_specs(plan)
    todo = [s for s in specs if store.entry(s) is None]
    if processes > 1 and todo:
        ex = Execution.resolve(device, backend=backend)
        if ex.device.type == "cpu":
            keyed = {ex.run_key(s): s for s in todo}
            chunks = sorted(group_chunks(keyed, max_ensemble), key=lambda c: chunk_cost(c, keyed), reverse=True)
            if len(chunks) > 1:
                _export_in_processes([[keyed[k] for k in c] for c in chunks], min(processes, len(chunks)), store,
                                     dict(early_step=early_step, device=device, command=command, progress=progress,
                                          max_ensemble=max_ensemble, checkpoint_every=checkpoint_every,
                                          backend=backend))
                store.write_manifest()  # once more, after every worker's last write
                return store.status(specs)
    lock = threading.Lock()

    def save(runs: list[Run]) -> None:
        runs = [r for r in runs if not r.meta.get("stored")]
        twins = train([early_twin(r.spec, min(early_step, r.spec.train.steps)) for r in runs], device,
                      progress=progress, max_ensemble=max_ensemble, use_store=False, backend=backend)
        with lock:  # one writer of the manifest at a time
            for run, twin in zip(runs, twins):
                store.save(run, twin, command)

    runs = train(todo, device, progress=progress, max_ensemble=max_ensemble, checkpoint_every=checkpoint_every,
                 checkpoint_dir=store.checkpoint_dir, on_trained=save, backend=backend)
    save([r for r in runs if store.entry(r.spec) is None])  # runs the run cache already held
    if store.root.exists():  # an export killed after its last entry, before its manifest: listed now
        store.write_manifest()
    return store.status(specs)


def _export_in_processes(chunks: list[list[RunSpec]], processes: int, store: RunStore, kwargs: dict) -> None:
    """Store ``chunks`` (ensembles, largest first) with :func:`store_plan` in ``processes`` spawned
    worker processes of one thread each, each taking the next ensemble when its own is stored.

    The workers run in their own process group, so an interrupt reaches them once, from here: a
    ``KeyboardInterrupt`` (Ctrl-C, or SIGINT sent to this process alone) is passed on to every
    worker, which checkpoints its ensemble into the store's ``ckpt/`` and stops; then it
    propagates.  A SIGKILL cannot be passed on: each worker watches this process and, once it is
    gone, interrupts itself the same way (it does not train on, an orphan, under the next export).
    A worker that fails raises a ``RuntimeError`` here once the others have ended."""
    import multiprocessing as mp
    import signal

    ctx = mp.get_context("spawn")  # a fresh interpreter: nothing of this one is inherited
    taken = ctx.Value("i", 0)  # the index of the next ensemble to take
    workers = [ctx.Process(target=_export_worker, args=(chunks, taken, str(store.root), kwargs, os.getpid()))
               for _ in range(processes)]
    for w in workers:
        w.start()
    try:
        for w in workers:
            w.join()
    except KeyboardInterrupt:
        for w in workers:
            if w.is_alive():
                try:
                    os.kill(w.pid, signal.SIGINT)
                except ProcessLookupError:  # it ended in the meantime
                    pass
        for w in workers:
            w.join()
        raise
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"store export: {len(failed)} of {processes} worker processes failed (exit codes {failed}); "
                           "their errors are printed above, and the ensembles they finished are in the store")


def _interrupt_when_orphaned(parent: int, every: float = 0.5) -> None:
    """Send this process SIGINT (its ensemble checkpoints and it stops, as on Ctrl-C) once its
    parent, the export process ``parent``, is gone: watched from a daemon thread every ``every`` s."""
    import signal
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, name="export-parent-watch", daemon=True).start()


def _export_worker(chunks: list[list[RunSpec]], taken, root: str, kwargs: dict, parent: int) -> None:
    """One worker process of :func:`_export_in_processes` (``parent``: its process id): store the
    next ensemble until none is left."""
    import signal
    import sys

    if hasattr(os, "setpgrp"):
        os.setpgrp()  # interrupts come from the parent, once
    # and are honoured even where the export was started with SIGINT ignored (a background job
    # of a non-interactive shell), which a spawned interpreter would inherit
    signal.signal(signal.SIGINT, signal.default_int_handler)
    torch.set_num_threads(1)
    store = RunStore(root)
    try:
        _interrupt_when_orphaned(parent)
        while True:
            with taken.get_lock():
                i = taken.value
                taken.value += 1
            if i >= len(chunks):
                return
            store_plan({"ensemble": chunks[i]}, store=store, processes=1, **kwargs)
    except KeyboardInterrupt:
        sys.exit(130)  # the ensemble in training has written its checkpoint
    except WriteFailed as err:  # one line, not a traceback: the export reports the failed worker
        print(f"store export: worker process {os.getpid()}: error: {err}", file=sys.stderr)
        sys.exit(1)


def store_summary(plan: dict[str, list[RunSpec]], store: RunStore | None = None) -> dict[str, str]:
    """Per chapter, what the run store holds of its runs in this plan: ``"24 of 24 runs stored,
    trained on cuda (NVIDIA H200), 2026-12-01"``, ``"0 of 24 runs stored"`` or ``"trains nothing"``,
    followed by ``"; 16 in training (23-31% of their steps)"`` when ``store export`` left some of
    them in its committed checkpoints (:meth:`RunStore.checkpoints`)."""
    store = store or RunStore()
    training = {key: c["step"] / c["steps"] for c in store.checkpoints() if c.get("current") for key in c["keys"]}
    out = {}
    for chapter, specs in plan.items():
        entries = [e for e in (store.entry(s) for s in specs) if e is not None]
        text = f"{len(entries)} of {len(specs)} runs stored"
        if entries:
            devices = sorted({e.provenance["device"] for e in entries})
            dates = sorted(e.provenance["date"][:10] for e in entries)
            text += f", trained on {', '.join(devices)}, {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
        done = [training[k] for k in {experiment_key(s) for s in specs} if k in training]
        if done:
            lo, hi = f"{100 * min(done):.0f}", f"{100 * max(done):.0f}"
            text += f"; {len(done)} in training ({lo if lo == hi else f'{lo}-{hi}'}% of their steps)"
        out[chapter] = text
    return out
