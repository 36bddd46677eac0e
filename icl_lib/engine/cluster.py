"""Where the ensembles of a plan train: in this process, or on a Dask cluster.

:func:`icl_lib.train` trains in this process (the ``local`` executor).  For plans that outgrow one
machine, :func:`train_on_dask` sends each shape-compatible ensemble to a Dask worker as one task:
the worker trains it with the same engine (:class:`~icl_lib.engine.trainer.EnsembleTrainer`, on
its GPU when it has one) and returns the runs; the client stores them in its run cache (atomic
writes; the workers need no shared file system).  A worker lost mid-plan (killed, out of memory)
costs its ensemble a retry on another worker, not the plan.  A model's numbers do not depend on
the executor: the client resolves the :class:`~icl_lib.engine.execution.Execution` once (device,
draw-ahead, CUDA graphs, compilation, CPU backend, with this machine's environment variables) and
sends every setting of it with each task, so an ensemble trains the same way on a worker as
locally (tested bitwise on a ``LocalCluster``), and the client looks runs up and stores them under
the cache keys of that execution.

Clusters: ``scheduler=None`` starts a ``dask.distributed.LocalCluster`` of worker processes (one
thread each) on this machine; ``scheduler="tcp://HOST:8786"`` connects to a running scheduler,
e.g. one that ``dask-jobqueue`` (``SLURMCluster``, ``PBSCluster``) or ``dask-kubernetes`` started
(see the README).  Dask is an optional dependency, imported only here.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..config import RunSpec
from ..validate import check_int
from .atomic import WriteFailed
from .cache import RunCache
from .execution import Execution
from .run import Run, meta_key
from .training import group_chunks

__all__ = ["train_group", "train_on_dask"]

log = logging.getLogger(__name__)


def train_group(specs: Sequence[RunSpec], execution: dict, threads: int | None = None) -> list[Run]:
    """Train one shape-compatible ensemble from scratch and return its runs (a Dask task: runs
    on a worker, with ``threads`` intra-op threads, default the worker's).  ``execution``: the
    client's :meth:`Execution.settings <icl_lib.engine.execution.Execution.settings>`, resolved
    again here (a worker without the device named refuses the task with a ``ValueError``)."""
    import torch

    from .trainer import EnsembleTrainer  # the worker imports the engine itself

    if threads is not None:
        torch.set_num_threads(threads)
    ex = Execution.resolve(**execution)
    return EnsembleTrainer(list(specs), execution=ex, progress=False).run()


def train_on_dask(
    specs: Sequence[RunSpec],
    scheduler: str | None = None,
    workers: int = 2,
    device: str | None = None,
    max_ensemble: int = 64,
    retries: int = 2,
    progress: Callable[[int], None] | None = None,
    draw_ahead: int | str = "auto",
    graph: bool | None = None,
    compile: bool | str = "auto",
    backend: str = "auto",
) -> list[Run]:
    """Train (or load from the run cache) every spec on a Dask cluster; one :class:`Run` per spec.

    ``device``, ``draw_ahead``, ``graph``, ``compile`` and ``backend`` are the settings of
    :meth:`Execution.resolve <icl_lib.engine.execution.Execution.resolve>`, resolved once here as
    :func:`icl_lib.train` resolves them (``graph=None`` reads ``ICL_CUDA_GRAPH``, ``backend="auto"``
    ``ICL_BACKEND``, both of this machine's environment; ``device="auto"`` is this machine's
    choice), except that a named device need only be present on the workers (``device="cuda"``
    from a login node without a GPU).  Every worker trains with these settings, whatever its own
    environment, and the runs are looked up and stored under the run-cache keys of this execution.

    Runs already in the local run cache are not sent.  The missing ones are grouped by shape into
    ensembles of at most ``max_ensemble`` (as :func:`icl_lib.train` does), each trained as one
    task (``retries`` further attempts if its worker is lost), longest first; each finished
    ensemble is written to the run cache as it arrives (runs that cannot be, on a full disk, are
    returned all the same, with one warning line, as :func:`icl_lib.train` does).
    ``scheduler=None`` starts a local cluster of ``workers`` processes of one thread each.  ``progress`` is called with the
    model-steps of every finished ensemble.
    """
    from dask.distributed import Client, LocalCluster, as_completed  # optional dependency

    specs = list(specs)
    workers = check_int("workers", workers, 1, 1024)
    if device is None:
        raise ValueError("device=None is invalid: accepted 'cpu', 'cuda' or 'auto' (named by the caller)")
    ex = Execution.resolve(device, draw_ahead, graph, compile, backend, here=False)
    store = RunCache()
    found: dict[str, Run] = {}
    todo: dict[str, RunSpec] = {}
    for s in specs:
        key = ex.run_key(s)
        if key not in found and key not in todo:
            hit = store.load(key)
            if hit is not None:
                found[key] = hit
            else:
                todo[key] = s
    chunks = sorted(group_chunks(todo, max_ensemble), key=lambda c: -len(c) * todo[c[0]].train.steps)
    unsaved: list[WriteFailed] = []
    cluster = None
    if chunks:
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster if cluster is not None else scheduler)
        try:
            futures = {client.submit(train_group, [todo[k] for k in chunk], ex.settings(), 1 if cluster else None,
                                     retries=retries, pure=False): chunk for chunk in chunks}
            for future in as_completed(futures):
                runs = future.result()
                for k, run in zip(futures[future], runs):
                    if meta_key(run.spec, run.meta) != k:  # the worker trained another execution
                        raise RuntimeError(f"a Dask worker trained run {k} on {run.meta.get('device')} with "
                                           f"backend {run.meta.get('backend')!r}, not as asked ({ex})")
                    found[k] = run
                    try:
                        store.save(k, run)
                    except WriteFailed as err:
                        unsaved.append(err)
                if progress is not None:
                    progress(sum(r.spec.train.steps for r in runs))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
            if unsaved:
                log.warning("icl_lib run cache: %d trained runs could not be cached, the first because %s; they "
                            "are returned, and a later call trains them again", len(unsaved), unsaved[0])
    return [found[ex.run_key(s)] for s in specs]
