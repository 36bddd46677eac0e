"""`store export` killed with SIGKILL, again and again, at the moments that matter -- half-way
through writing a checkpoint, a run-cache entry, a store entry, the manifest -- and started again
each time, ends with a store whose every entry verifies, a manifest that lists exactly its entries,
the numbers of an export never killed, and no temporary, half-written or orphaned file left in the
store or the run cache.  An export in worker processes killed so leaves no worker training on."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig
from icl_lib.engine.cache import RunCache
from icl_lib.engine.store import RunStore, experiment_key
from icl_lib.book.plan_training import store_plan

ROOT = Path(__file__).resolve().parents[2]
STEPS, EARLY = 1000, 20
PLAN = """
from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig
tc = TrainConfig(steps={steps}, batch=16, lr=3e-3, n_log=8, val_size=64)
plan = {{"ch": [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), tc, seed=s) for h in (1, 2) for s in (0, 1)]}}
""".format(steps=STEPS)
# The export as `python -m icl_lib store export` runs it (store_plan, the store's ckpt/ and the run
# cache), on the plan above; its disk is slow: every file is written half, then the rest 0.2 s
# later, so that a kill can land in the middle of a write.
SCRIPT = PLAN + """
import time
from icl_lib.engine import atomic
from icl_lib.book.plan_training import store_plan

def slow_write(fh, data):
    fh.write(data[: len(data) // 2])
    fh.flush()
    time.sleep(0.2)
    fh.write(data[len(data) // 2 :])

atomic._write = slow_write
store_plan(plan, early_step={early}, device="cpu", command="test", progress=False, max_ensemble=2,
           checkpoint_every=0.3, processes=1, backend="eager")
""".format(early=EARLY)


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in _files(folder) if ".tmp" in p.name]


@pytest.mark.slow
def test_an_export_killed_at_every_kind_of_write_resumes_to_a_store_that_verifies(tmp_path, monkeypatch):
    store_dir, cache_dir = tmp_path / "store", tmp_path / "cache"
    env = dict(os.environ, ICL_STORE_DIR=str(store_dir), ICL_CACHE_DIR=str(cache_dir), ICL_BACKEND="eager",
               PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", ICL_PROGRESS="0")
    ckpt = store_dir / "ckpt"
    # when to kill each start: the export is then writing (half-written, not yet renamed) ...
    moments = [
        ("a checkpoint", lambda: _temporaries(ckpt)),
        ("a run-cache entry", lambda: [p for p in _temporaries(cache_dir) if p.parent == cache_dir]),
        ("a store entry", lambda: [p for p in _temporaries(store_dir) if ".npz." in p.name]),
        ("the manifest after the last entry", lambda: len(list(store_dir.glob("*.npz"))) == 4
         and [p for p in _temporaries(store_dir) if ".manifest.json." in p.name]),
    ]
    t0 = time.monotonic()
    for what, now in moments:
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not now() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert proc.poll() is None, f"the export ended (exit {proc.returncode}) before it wrote {what}"
            assert now(), f"the export did not write {what} within 60 s"
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert _temporaries(store_dir) + _temporaries(cache_dir), f"killed while writing {what}: a file half-written"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0
    assert time.monotonic() - t0 < 90  # well under a minute on two idle cores

    exec(PLAN, ns := {})
    specs = ns["plan"]["ch"]
    monkeypatch.setenv("ICL_STORE_DIR", str(store_dir))
    store = RunStore()
    current, stale = store.scan()
    assert current == {experiment_key(s) for s in specs} and stale == []
    manifest = json.loads((store_dir / "manifest.json").read_text())
    assert sorted(r["key"] for r in manifest) == sorted(p.stem for p in store_dir.glob("*.npz")) == sorted(current)
    for s in specs:
        assert store.entry(s) is not None and store.verify_early(s)["ok"]
    # nothing temporary, half-written or left over: the store holds its entries and manifest, the
    # run cache its entries (each loads and verifies) and its lock files (kept by design)
    assert not _temporaries(store_dir) and not _temporaries(cache_dir)
    assert sorted(p.name for p in _files(store_dir)) == sorted([f"{k}.npz" for k in current] + ["manifest.json"])
    cache = RunCache(cache_dir)
    entries = [p for p in _files(cache_dir) if p.parent != cache_dir / "locks"]
    assert all(p.parent == cache_dir and p.suffix == ".pt" for p in entries), entries
    assert all(cache.load(p.stem) is not None for p in entries) and not (cache_dir / "corrupt").exists()

    # the numbers of an export that was never killed
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "plain-store"))
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "plain-cache"))
    assert store_plan(ns["plan"], early_step=EARLY, device="cpu", command="test", progress=False, max_ensemble=2,
                      backend="eager")["complete"]
    plain = RunStore()
    for s in specs:
        a, b = store.entry(s), plain.entry(s)
        for k in "QKVO":
            assert torch.equal(a.run.params[k], b.run.params[k]) and torch.equal(a.early_params[k], b.early_params[k])
        assert torch.equal(a.run.history["val_loss"], b.run.history["val_loss"])


ORPHANS = """
from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig
from icl_lib.book.plan_training import store_plan
tc = TrainConfig(steps=200_000, batch=16, lr=1e-3, n_log=8, val_size=64)
plan = {"ch": [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), tc, seed=0) for h in (1, 2)]}
store_plan(plan, early_step=20, device="cpu", command="test", progress=False, max_ensemble=1,
           checkpoint_every=0.2, processes=2, backend="eager")
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_the_workers_of_an_export_killed_with_sigkill_checkpoint_and_stop(tmp_path):
    """`store export --processes 2`: its workers run in their own process group, so a SIGKILL of the
    export reaches none of them.  Before, they trained on, orphans, writing the store and racing
    the next export; now each notices its export gone, checkpoints its ensemble and stops."""
    store_dir = tmp_path / "store"
    env = dict(os.environ, ICL_STORE_DIR=str(store_dir), ICL_CACHE_DIR=str(tmp_path / "cache"),
               ICL_BACKEND="eager", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", ICL_PROGRESS="0")
    proc = subprocess.Popen([sys.executable, "-c", ORPHANS], env=env, cwd=tmp_path, start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(list((store_dir / "ckpt").glob("*.pt"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list((store_dir / "ckpt").glob("*.pt"))) == 2, "two ensembles should be in training"
        workers = [w for w in _children(proc.pid) if "spawn_main" in Path(f"/proc/{w}/cmdline").read_text()]
        assert len(workers) == 2
        os.kill(proc.pid, signal.SIGKILL)  # the export alone, as `kill -9 PID` does
        proc.wait()
        deadline = time.monotonic() + 30
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_running(w) for w in workers), "the workers of a killed export train on"
    finally:
        for pid in [proc.pid] + workers:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    checkpoints = RunStore(store_dir).checkpoints()
    assert len(checkpoints) == 2 and all(c["resumable"] and 0 < c["step"] < 200_000 for c in checkpoints)
    assert not _temporaries(store_dir) and not list(store_dir.glob("*.npz"))
