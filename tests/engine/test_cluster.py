"""train-plan on a Dask cluster: a LocalCluster of two worker processes trains a small plan to the
bitwise numbers of the local executor, with the execution the client asked for (its backend, not
the workers' own default), and a worker killed mid-plan costs its ensemble a retry."""

import os

import pytest
import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig, train
from icl_lib.engine.cache import RunCache

pytest.importorskip("distributed")

TC = TrainConfig(steps=60, batch=16, lr=3e-3, n_log=4, val_size=64)


def _plan():
    a = [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), TC, seed=s) for h in (1, 2) for s in (0, 1)]
    b = [RunSpec(DataConfig(d=4, L=5), ModelConfig(heads=2, attention=k), TC, seed=2) for k in ("softmax", "linear")]
    c = [RunSpec(DataConfig(d=4, L=6, supports=[[0, 1], [1, 2, 3]]), ModelConfig(heads=3), TC, seed=3)]
    return a + b + c


def _same(x, y):
    for k in "QKVO":
        assert torch.equal(x.params[k], y.params[k]), k
    for k in ("val_loss", "train_loss", "KQ", "OV"):
        assert torch.equal(x.history[k], y.history[k]), k


@pytest.mark.slow
def test_a_dask_plan_equals_the_local_executor_bitwise(tmp_path, monkeypatch):
    from icl_lib.engine.cluster import train_on_dask

    specs = _plan()
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "local"))
    local = train(specs, device="cpu", progress=False)
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "dask"))
    done = []
    remote = train_on_dask(specs, workers=2, device="cpu", progress=done.append)
    assert sum(done) == len(specs) * TC.steps  # every ensemble reported once
    for x, y in zip(local, remote):
        assert x.spec == y.spec
        _same(x, y)
    assert len(list(RunCache().root.glob("*.pt"))) == len(specs)  # stored by the client
    again = train(specs, device="cpu", progress=False)  # the local executor finds them in the cache
    assert all(r.meta["cached"] for r in again)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "fused"])
def test_the_workers_train_the_backend_the_client_asked_for(backend, tmp_path, monkeypatch):
    """`train-plan --executor dask --backend B` trains with B on every worker, even where the
    workers' own environment asks for the other backend (ICL_BACKEND, which a LocalCluster's
    workers inherit): the runs record B, the client's cache holds them under B's keys, and they
    equal the local executor's runs with B, bit for bit."""
    from icl_lib.book.plan_training import train_plan

    other = {"eager": "fused", "fused": "eager"}[backend]
    monkeypatch.setenv("ICL_BACKEND", other)  # what a worker would train with if not told
    specs = _plan()[:2] + _plan()[4:5]  # two ensembles: two tasks
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "dask"))
    remote = train_plan({"ch": specs}, device="cpu", progress=False, executor="dask", workers=2,
                        backend=backend)["ch"]
    assert [r.meta["backend"] for r in remote] == [backend] * len(specs)
    keys = {p.stem for p in RunCache().root.glob("*.pt")}
    assert keys == {s.key("cpu", 1, backend) for s in specs} and keys.isdisjoint(s.key("cpu", 1, other) for s in specs)
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "local"))
    local = train(specs, device="cpu", progress=False, backend=backend)
    for x, y in zip(local, remote):
        assert x.spec == y.spec and x.meta["backend"] == backend
        _same(x, y)


def _die_once(specs, execution, threads=None):
    """A task that kills its worker process the first time it runs (marker file), then trains."""
    marker = os.environ["ICL_TEST_MARKER"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the worker dies mid-task
    from icl_lib.engine.cluster import train_group

    return train_group(specs, execution, threads)


def test_a_killed_worker_costs_its_ensemble_a_retry(tmp_path, monkeypatch):
    from icl_lib.engine import cluster

    specs = _plan()[:2]
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "dask"))
    monkeypatch.setenv("ICL_TEST_MARKER", str(tmp_path / "died"))
    monkeypatch.setattr(cluster, "train_group", _die_once)
    runs = cluster.train_on_dask(specs, workers=2, device="cpu")
    assert (tmp_path / "died").exists()  # a worker died once ...
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "local"))
    for x, y in zip(runs, train(specs, device="cpu", progress=False)):  # ... and the plan still finished
        _same(x, y)


def test_a_named_device_is_resolved_for_the_workers_and_checked_on_each():
    """A client without a GPU may send CUDA work: it resolves every choice for the device named
    (draw-ahead, compilation, backend), and each worker resolves those settings again, which
    checks that it has the device."""
    from icl_lib.engine.execution import GPU_DRAW_AHEAD, Execution

    ex = Execution.resolve("cuda", graph=None, backend="auto", here=False)
    assert (ex.device.type, ex.draw_ahead, ex.backend) == ("cuda", GPU_DRAW_AHEAD, "eager")
    cpu = Execution.resolve("cpu", backend="fused")
    assert Execution.resolve(**cpu.settings()) == cpu
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device='cuda' is invalid"):
            Execution.resolve(**ex.settings())
