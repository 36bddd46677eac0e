"""A full disk gives one clear error and loses nothing: a write of the run cache, the run store or a
checkpoint that fails half-way (``ENOSPC``, simulated: the write function writes half the file,
then raises) removes its temporary file and names the file, the bytes it needed and the reason;
:func:`icl_lib.train` returns the runs it could not cache, a periodic checkpoint that fails does
not stop training, and a run store that cannot be written raises while the run cache keeps the runs."""

import errno
import logging

import pytest
import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig, train
from icl_lib.engine import atomic
from icl_lib.engine.atomic import WriteFailed
from icl_lib.engine.cache import RunCache
from icl_lib.engine.store import RunStore
from icl_lib.engine.trainer import EnsembleTrainer

TC = TrainConfig(steps=24, batch=8, lr=3e-3, n_log=3, val_size=32)


def _specs():
    a = [RunSpec(DataConfig(d=3, L=8), ModelConfig(heads=h), TC, seed=0) for h in (1, 2)]
    return a + [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=1), TC, seed=1)]  # a second ensemble


def _disk_full(monkeypatch, only: str = ""):
    """Every write of :mod:`icl_lib.engine.atomic` (of files whose temporary name holds ``only``)
    writes half its bytes, then fails as a full disk does; returns the temporary paths tried."""
    tried = []
    plain = atomic._write

    def half_then_enospc(fh, data):
        if only not in fh.name:
            return plain(fh, data)
        tried.append(fh.name)
        fh.write(data[: len(data) // 2])
        fh.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_write", half_then_enospc)
    return tried


def _temporaries(folder):
    return [p for p in folder.rglob("*") if ".tmp" in p.name]


def _same(x, y):
    for k in "QKVO":
        assert torch.equal(x.params[k], y.params[k]), k
    assert torch.equal(x.history["val_loss"], y.history["val_loss"])


def test_train_returns_the_runs_it_could_not_cache_with_one_warning(monkeypatch, caplog):
    """Before: torch.save's "unexpected pos" RuntimeError (or "iostream error"), a .tmp file left in
    the cache, and every run of the call lost."""
    specs = _specs()
    plain_write = atomic._write
    tried = _disk_full(monkeypatch)
    with caplog.at_level(logging.WARNING):
        runs = train(specs, device="cpu", progress=False, use_store=False)
    cache = RunCache()
    assert len(tried) == 3 and not _temporaries(cache.root) and not list(cache.root.glob("*.pt"))
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    first = cache.path(specs[0].key("cpu"))
    for words in ("3 trained runs could not be cached", "ENOSPC (errno 28): No space left on device",
                  "bytes to write", "they are returned"):
        assert words in lines[0], lines[0]
    assert any(str(cache.path(s.key("cpu"))) in lines[0] for s in specs), (first, lines[0])
    assert [r.spec for r in runs] == specs and not any(r.meta.get("cached") for r in runs)
    monkeypatch.setattr(atomic, "_write", plain_write)  # room again: the runs train (the same numbers), cached
    again = train(specs, device="cpu", progress=False, use_store=False)
    for x, y in zip(runs, again):
        _same(x, y)
    assert len(list(cache.root.glob("*.pt"))) == 3


def test_a_failed_write_raises_one_error_naming_the_file_and_leaves_nothing(tmp_path, monkeypatch):
    _disk_full(monkeypatch)
    target = tmp_path / "entry.pt"
    with pytest.raises(WriteFailed) as err:
        atomic.write_atomic(target, b"x" * 5312, "run cache entry")
    e = err.value
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC and e.path == target and e.size == 5312
    assert str(e).startswith(f"run cache entry {target} could not be written (5,312 bytes to write, ")
    assert "No space left on device" in str(e) and not list(tmp_path.iterdir())


def test_a_checkpoint_that_cannot_be_written_costs_one_warning_not_the_run(tmp_path, monkeypatch, caplog):
    spec = _specs()[:1]
    plain = EnsembleTrainer(spec, "cpu", progress=False, backend="eager").run()[0]
    tried = _disk_full(monkeypatch)
    ckpt = tmp_path / "ckpt" / "run.pt"
    trainer = EnsembleTrainer(spec, "cpu", progress=False, checkpoint=ckpt, checkpoint_every=0.0, backend="eager")
    with caplog.at_level(logging.WARNING, logger="icl_lib.engine.trainer"):
        run = trainer.run()[0]
    assert len(tried) == TC.steps - 1  # tried after every step but the last
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"checkpoint {ckpt} could not be written" in line and "training goes on" in line
    _same(run, plain)
    assert not ckpt.exists() and not _temporaries(tmp_path)


def test_an_interrupt_whose_checkpoint_cannot_be_written_still_interrupts(tmp_path, monkeypatch, caplog):
    spec = _specs()[:1]
    ckpt = tmp_path / "run.pt"
    trainer = EnsembleTrainer(spec, "cpu", progress=False, checkpoint=ckpt, checkpoint_every=3600, backend="eager")
    _disk_full(monkeypatch)
    plain_step = trainer.stepper.__class__.__call__

    def interrupt_at_5(self, batch, t):
        if t == 5:
            raise KeyboardInterrupt
        return plain_step(self, batch, t)

    monkeypatch.setattr(trainer.stepper.__class__, "__call__", interrupt_at_5)
    with caplog.at_level(logging.WARNING, logger="icl_lib.engine.trainer"), pytest.raises(KeyboardInterrupt):
        trainer.run()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "could not be written" in line and "at step 5" in line and not list(tmp_path.iterdir())


def test_a_store_that_cannot_be_written_raises_and_the_run_cache_keeps_the_runs(tmp_path, monkeypatch):
    """`store export` on a full store disk: one WriteFailed naming the entry; the runs trained are
    in the run cache, so the same export with room again stores them without training."""
    from icl_lib.book.plan_training import store_plan

    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    plan = {"ch": _specs()[:2]}
    plain_write = atomic._write
    _disk_full(monkeypatch, only=".npz.")
    with pytest.raises(WriteFailed, match=r"run store entry .*\.npz could not be written .*ENOSPC") as err:
        store_plan(plan, early_step=8, device="cpu", command="test", progress=False, backend="eager")
    store = RunStore()
    assert err.value.path.parent == store.root and not _temporaries(store.root)
    assert not list(store.root.glob("*.npz"))
    cached = {p.name for p in RunCache().root.glob("*.pt")}
    assert {s.key("cpu") + ".pt" for s in plan["ch"]} <= cached  # the runs and their twins
    monkeypatch.setattr(atomic, "_write", plain_write)
    trained = []
    plain_run = EnsembleTrainer.run
    monkeypatch.setattr(EnsembleTrainer, "run", lambda self, *a, **k: trained.append(self) or plain_run(self, *a, **k))
    assert store_plan(plan, early_step=8, device="cpu", command="test", progress=False, backend="eager")["complete"]
    assert trained == []  # both runs and their early twins came from the run cache
