"""Where the ensembles of a plan train: in this process, or on a Dask cluster.

:func:`icl_lib.train` trains in this process (the ``local`` executor).  For plans that outgrow one
machine, :func:`train_on_dask` sends each shape-compatible ensemble to a Dask worker as one task:
the worker trains it with the same engine (:class:`~icl_lib.engine.trainer.EnsembleTrainer`, on
its GPU when it has one) and returns the runs; the client stores them in its run cache (atomic
writes; the workers need no shared file system).  A worker lost mid-plan (killed, out of memory)
costs its ensemble a retry on another worker, not the plan.  A model's numbers do not depend on
the executor: an ensemble trains the same way on a worker as locally (tested bitwise on a
``LocalCluster``).

Clusters: ``scheduler=None`` starts a ``dask.distributed.LocalCluster`` of worker processes (one
thread each) on this machine; ``scheduler="tcp://HOST:8786"`` connects to a running scheduler,
e.g. one that ``dask-jobqueue`` (``SLURMCluster``, ``PBSCluster``) or ``dask-kubernetes`` started
(see the README).  Dask is an optional dependency, imported only here.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..config import RunSpec
from ..validate import check_int
from .cache import RunCache
from .execution import GPU_DRAW_AHEAD
from .run import Run, meta_key
from .training import group_chunks

__all__ = ["train_group", "train_on_dask"]


def train_group(specs: Sequence[RunSpec], device: str = "auto", threads: int | None = None) -> list[Run]:
    """Train one shape-compatible ensemble from scratch and return its runs (a Dask task: runs
    on a worker, with ``threads`` intra-op threads, default the worker's)."""
    import torch

    from .trainer import EnsembleTrainer  # the worker imports the engine itself

    if threads is not None:
        torch.set_num_threads(threads)
    return EnsembleTrainer(list(specs), device, progress=False).run()


def train_on_dask(
    specs: Sequence[RunSpec],
    scheduler: str | None = None,
    workers: int = 2,
    device: str = "auto",
    max_ensemble: int = 64,
    retries: int = 2,
    progress: Callable[[int], None] | None = None,
) -> list[Run]:
    """Train (or load from the run cache) every spec on a Dask cluster; one :class:`Run` per spec.

    Runs already in the local run cache are not sent.  The missing ones are grouped by shape into
    ensembles of at most ``max_ensemble`` (as :func:`icl_lib.train` does), each trained as one
    task (``retries`` further attempts if its worker is lost), longest first; each finished
    ensemble is written to the run cache as it arrives.  ``scheduler=None`` starts a local
    cluster of ``workers`` processes of one thread each.  ``progress`` is called with the
    model-steps of every finished ensemble.
    """
    from dask.distributed import Client, LocalCluster, as_completed  # optional dependency

    specs = list(specs)
    workers = check_int("workers", workers, 1, 1024)
    store = RunCache()
    found: dict[RunSpec, Run] = {}
    todo: dict[str, RunSpec] = {}
    for s in specs:
        hit = _cached(store, s)
        if hit is not None:
            found[s] = hit
        else:
            todo.setdefault(_local_key(s), s)
    chunks = sorted(group_chunks(todo, max_ensemble), key=lambda c: -len(c) * todo[c[0]].train.steps)
    cluster = None
    if chunks:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster if cluster is not None else scheduler)
        try:
            futures = {client.submit(train_group, [todo[k] for k in chunk], device, 1 if cluster else None,
                                     retries=retries, pure=False): chunk for chunk in chunks}
            for future in as_completed(futures):
                runs = future.result()
                for k, run in zip(futures[future], runs):
                    store.save(meta_key(run.spec, run.meta), run)
                    found[todo[k]] = run
                if progress is not None:
                    progress(sum(r.spec.train.steps for r in runs))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    for s in specs:
        if s not in found:
            found[s] = _cached(store, s)
    return [found[s] for s in specs]


def _local_key(s: RunSpec) -> str:
    return s.key("cpu")


def _cached(store: RunCache, s: RunSpec) -> Run | None:
    """The run of ``s`` in the run cache, trained on any device this client knows of."""
    for device, draw, backend in (("cpu", 1, "fused"), ("cpu", 1, "eager"), ("cuda", GPU_DRAW_AHEAD, "eager")):
        run = store.load(s.key(device, draw, backend))
        if run is not None:
            return run
    return None
