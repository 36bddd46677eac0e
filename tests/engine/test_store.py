"""The run store: runs trained once (on a GPU, for the paper profile) and committed, found by any
build by spec and model code, verified on load, their early checkpoint reproducible from the seed."""

import dataclasses
import datetime as dt
import json
import logging

import numpy as np
import pytest
import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig, describe_sources, train
from icl_lib.engine.cache import RunCache
from icl_lib.engine.store import CPU_TOLERANCE, EARLY_TOLERANCE, RunStore, experiment_key
from icl_lib.book.plan_training import store_plan, store_summary
from icl_lib.version import MODEL_CODE_VERSION

TC = TrainConfig(steps=80, batch=16, lr=3e-3, n_log=8, val_size=64)  # a small "paper-shaped" profile


def _plan():
    return {"ch_a": [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), TC, seed=s) for h in (1, 2) for s in (0, 1)],
            "ch_b": [RunSpec(DataConfig(d=4, L=6, supports=[[0, 1], [1, 2, 3]]), ModelConfig(heads=2), TC, seed=0)]}


@pytest.fixture
def stored(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    plan = _plan()
    status = store_plan(plan, early_step=20, device="cpu", command="test", progress=False)
    assert status["complete"] and status["stored"] == 5 and not status["stale"]
    return plan, RunStore()


def test_a_build_without_the_training_finds_every_run_in_the_store(stored, tmp_path, monkeypatch):
    """A fresh run cache (another machine): every run comes from the store, nothing trains."""
    plan, store = stored
    specs = [s for ss in plan.values() for s in ss]
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "other-machine"))
    runs = train(specs, device="cpu", progress=False)
    assert all(r.meta.get("stored") for r in runs) and not list(RunCache().root.glob("*.pt"))
    trained = train(specs, device="cpu", progress=False, use_store=False)  # what the store came from
    for a, b in zip(runs, trained):
        for k in "QKVO":
            assert torch.equal(a.params[k], b.params[k].float())
        assert len(a.history["step"]) <= len(b.history["step"]) and a.history["step"][-1] == TC.steps
    manifest = json.loads((store.root / "manifest.json").read_text())
    assert len(manifest) == 5 and {m["code"] for m in manifest} == {MODEL_CODE_VERSION}
    summary = store_summary(plan, store)
    assert summary["ch_a"].startswith("4 of 4 runs stored, trained on cpu")
    day = runs[0].meta["date"][:10]  # when the fixture wrote the store (UTC)
    assert {r.meta["date"][:10] for r in runs} == {day} and dt.date.fromisoformat(day)
    assert describe_sources(runs) == f"loaded from the run store (trained on cpu, {day})"
    assert describe_sources(trained) == "trained now"
    assert describe_sources(runs[:2] + trained[:1]) == f"2 loaded from the run store (trained on cpu, {day}), 1 trained now"
    again = train(specs[:1], device="cpu", progress=False, use_store=False)
    assert describe_sources(again) == "loaded from the run cache"
    with pytest.raises(ValueError, match=r"runs=\[\] is invalid"):
        describe_sources([])


def test_the_early_checkpoint_is_reproduced_from_the_seed(stored):
    """Each stored run's early twin, retrained here from its seed, ends at the stored early
    checkpoint (trained on this CPU: to float32 rounding of the packing, 1e-6); a twin of another
    seed does not (its initialisation differs)."""
    plan, store = stored
    for s in plan["ch_a"][:2] + plan["ch_b"]:
        v = store.verify_early(s)
        assert v["ok"] and v["init_equal"] and v["max_param_gap"] < 1e-6 and v["val_gap"] < 1e-5, v
    s = plan["ch_a"][0]
    path = store.path(s)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    prov = json.loads(str(arrays.pop("provenance")))
    assert prov["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    other = dataclasses.replace(s, seed=s.seed + 7)  # the entry claims another seed's run
    prov["spec"] = other.to_dict()
    np.savez_compressed(store.path(other), **arrays, provenance=np.array(json.dumps(prov, sort_keys=True)))
    v = store.verify_early(other)
    assert not v["ok"] and not v["init_equal"] and v["max_param_gap"] > 100 * CPU_TOLERANCE, v


def test_a_tampered_entry_fails(stored, caplog):
    """Changing a stored array without its checksum makes the entry invalid (not used, one
    warning); changing it with a recomputed checksum is caught by the early-checkpoint test."""
    plan, store = stored
    s = plan["ch_a"][1]
    path = store.path(s)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["early/V"] = arrays["early/V"] + 1e-3
    np.savez_compressed(path, **arrays)
    with caplog.at_level(logging.WARNING, logger="icl_lib.engine.store"):
        assert store.load(s) is None
    assert "checksum" in caplog.text and str(path) in caplog.text
    from icl_lib.engine.store import _arrays_checksum

    prov = json.loads(str(arrays.pop("provenance")))
    prov["checksum"] = _arrays_checksum(arrays)
    np.savez_compressed(path, **arrays, provenance=np.array(json.dumps(prov, sort_keys=True)))
    assert store.load(s) is not None
    v = store.verify_early(s)  # the tampered checkpoint is not this code's
    assert not v["ok"] and v["max_param_gap"] > 50 * CPU_TOLERANCE, v


def test_an_entry_of_other_model_code_is_stale_never_used(stored, monkeypatch):
    plan, store = stored
    s = plan["ch_a"][0]
    old = store.path(s)
    with np.load(old, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    prov = json.loads(str(arrays.pop("provenance")))
    prov["code"] = "0"
    target = store.root / f"{experiment_key(s, code='0')}.npz"
    np.savez_compressed(target, **arrays, provenance=np.array(json.dumps(prov)))
    old.unlink()
    assert store.load(s) is None  # the current code's key finds nothing
    assert store.status([s])["stale"] == [target.name] and not store.status([s])["complete"]


def test_the_repository_store_holds_no_stale_entry():
    """A change of MODEL_CODE_VERSION makes the committed store stale: regenerate it (make paper-runs)."""
    assert RunStore().status()["stale"] == []


@pytest.mark.slow
def test_the_repository_store_reproduces_its_early_checkpoints():
    """The committed entries come from this code and their configs: a few of them (the first three
    by key, and the first of each training backend and of each chapter-9 horizon among the rest)
    have their early twin retrained here from the seed. A CPU-trained entry must match to
    float32 rounding of the packing and of this CPU's vector kernels (CPU_TOLERANCE); a GPU-trained
    one draws other random streams, so only its initialisation is bitwise and its early
    validation losses agree within EARLY_TOLERANCE."""
    from icl_lib.engine.store import spec_from_dict

    store = RunStore()
    paths = sorted(store.root.glob("*.npz")) if store.root.exists() else []
    if not paths:
        pytest.skip(f"the repository store {store.root} holds no runs yet")
    chosen, kinds = {}, set()
    for i, p in enumerate(paths):
        with np.load(p, allow_pickle=False) as z:
            prov = json.loads(str(z["provenance"]))
        kind = (prov.get("backend", "eager"), prov["spec"]["train"]["steps"])
        if i < 3 or kind not in kinds:
            chosen[p] = prov
        kinds.add(kind)
    assert len({k[0] for k in kinds}) <= 2 and len(chosen) <= 3 + len(kinds)
    for p, prov in chosen.items():
        spec = spec_from_dict(prov["spec"])
        assert store.path(spec) == p, p.name
        v = store.verify_early(spec)
        assert v["init_equal"] and v["ok"], (p.name, v)
        if v["device"] == "cpu":
            assert v["max_param_gap"] < CPU_TOLERANCE and v["val_gap"] < CPU_TOLERANCE, (p.name, v)
        else:
            assert v["val_gap"] < EARLY_TOLERANCE, (p.name, v)


def _export(monkeypatch, tmp_path, cache: str, store: str, max_ensemble: int = 2):
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / cache))
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / store))
    return store_plan(_plan(), early_step=20, device="cpu", command="test", progress=False, max_ensemble=max_ensemble)


def test_an_interrupted_export_keeps_its_finished_ensembles_and_resumes_its_committed_checkpoint(tmp_path, monkeypatch):
    """`store export` writes each ensemble to the store as it ends and checkpoints the ones in
    training into the store's ckpt/ (committed with it): after an interruption, an export on
    another machine of the same kind (a fresh run cache) resumes there, to the numbers of an
    uninterrupted export, and leaves no checkpoint behind."""
    from icl_lib.engine.trainer import EnsembleTrainer

    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # one ensemble at a time: a fixed order
    plain_run, plain_load = EnsembleTrainer.run, EnsembleTrainer.load_state_dict
    other = _plan()["ch_b"][0]

    def interrupted(self, until=None, stop=None):
        if self.specs == [other] and self.tc.steps == TC.steps:
            assert plain_run(self, until=TC.steps // 2) is None  # stopped half-way: its checkpoint written
            raise KeyboardInterrupt
        return plain_run(self, until, stop)

    monkeypatch.setattr(EnsembleTrainer, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _export(monkeypatch, tmp_path, "cache-a", "store")
    store = RunStore()
    assert store.status([s for ss in _plan().values() for s in ss])["stored"] == 4  # ch_a's two ensembles
    (ckpt,) = store.checkpoints()
    assert ckpt["runs"] == 1 and ckpt["step"] == TC.steps // 2 and ckpt["resumable"] and ckpt["current"]
    assert ckpt["keys"] == [experiment_key(other)]
    assert not store.checkpoints("cuda")[0]["resumable"]  # a GPU draws other streams: it starts afresh
    assert store_summary(_plan(), store)["ch_b"] == "0 of 1 runs stored; 1 in training (50% of their steps)"

    resumed_at, trained = [], []

    def load(self, state):
        resumed_at.append(int(state["step"]))
        plain_load(self, state)

    def counted(self, until=None, stop=None):
        trained.extend(self.specs if self.tc.steps == TC.steps else [])
        return plain_run(self, until, stop)

    monkeypatch.setattr(EnsembleTrainer, "run", counted)
    monkeypatch.setattr(EnsembleTrainer, "load_state_dict", load)
    assert _export(monkeypatch, tmp_path, "cache-b", "store")["complete"]
    assert trained == [other] and resumed_at == [TC.steps // 2] and store.checkpoints() == []
    resumed = store.entry(other)
    assert _export(monkeypatch, tmp_path, "cache-c", "store-plain")["complete"]
    plain = RunStore().entry(other)
    for k in "QKVO":
        assert torch.equal(resumed.run.params[k], plain.run.params[k])
    assert torch.equal(resumed.run.history["val_loss"], plain.run.history["val_loss"])


def test_a_checkpoint_that_does_not_load_is_reported_not_resumed(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    store = RunStore()
    store.checkpoint_dir.mkdir(parents=True)
    (store.checkpoint_dir / "0123.pt").write_bytes(b"not a checkpoint")
    (c,) = store.checkpoints()
    assert c["file"] == "0123.pt" and c["invalid"]


def test_export_refuses_a_bad_ensemble_size_before_any_work(tmp_path, monkeypatch, capsys):
    from icl_lib.tools.cli import main

    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    assert main(["store", "export", "--chapters", "01", "--max-ensemble", "0"]) == 2
    assert "max_ensemble=0 is invalid" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_side_by_side_each_ensemble_is_stored_as_it_ends(tmp_path, monkeypatch, torch_threads):
    """On two threads, five one-model ensembles train two at a time; each is in the store before
    its thread starts the next one (so a stopped export loses only the ensembles in training)."""
    from icl_lib.engine.trainer import EnsembleTrainer

    torch_threads(2)
    plain_run = EnsembleTrainer.run
    stored_at_start = []

    def spied(self, until=None, stop=None):
        if self.tc.steps == TC.steps:
            stored_at_start.append(RunStore().status()["entries"])
        return plain_run(self, until, stop)

    monkeypatch.setattr(EnsembleTrainer, "run", spied)
    assert _export(monkeypatch, tmp_path, "cache", "store", max_ensemble=1)["complete"]
    # the 3rd and 4th starts wait for one and two ensembles to end, the 5th for three
    assert len(stored_at_start) == 5 and sorted(stored_at_start)[:2] == [0, 0] and max(stored_at_start) >= 3


@pytest.mark.slow
def test_an_export_in_worker_processes_stores_the_numbers_of_one_in_this_process(tmp_path, monkeypatch):
    """`store export --processes 2` on a CPU: the same ensembles (three, of at most two runs),
    trained one per single-threaded worker process, give the entries of an export in this
    process, bit for bit, with a manifest of all five and no checkpoint left."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # this process: one ensemble at a time
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "cache-p"))
    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store-p"))
    status = store_plan(_plan(), early_step=20, device="cpu", command="test", progress=False, max_ensemble=2,
                        processes=2)
    assert status["complete"] and status["stored"] == 5
    in_processes = RunStore()
    assert in_processes.checkpoints() == []
    manifest = json.loads((in_processes.root / "manifest.json").read_text())
    assert sorted(r["key"] for r in manifest) == sorted(experiment_key(s) for ss in _plan().values() for s in ss)
    assert _export(monkeypatch, tmp_path, "cache-s", "store-s")["complete"]
    here = RunStore()
    for spec in (s for ss in _plan().values() for s in ss):
        a, b = in_processes.entry(spec), here.entry(spec)
        for k in "QKVO":
            assert torch.equal(a.run.params[k], b.run.params[k]) and torch.equal(a.early_params[k], b.early_params[k])
        assert torch.equal(a.run.history["val_loss"], b.run.history["val_loss"])


_EXPORT_SCRIPT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if this test runs with SIGINT ignored
from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig
from icl_lib.book.plan_training import store_plan
tc = TrainConfig(steps=200_000, batch=16, lr=1e-3, n_log=8, val_size=64)
plan = {"ch": [RunSpec(DataConfig(d=3, L=6), ModelConfig(heads=h), tc, seed=0) for h in (1, 2, 3)]}
try:
    store_plan(plan, early_step=20, device="cpu", command="test", progress=False, max_ensemble=1,
               checkpoint_every=0.2, processes=2)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.slow
def test_an_interrupt_of_an_export_in_worker_processes_checkpoints_every_ensemble_in_training(tmp_path):
    """SIGINT sent to the exporting process alone (as `kill -INT` does; its workers run in their
    own process group) reaches each worker once: each checkpoints its ensemble into the store's
    ckpt/ and stops, the export exits, and nothing is left running or half-written."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    env = dict(os.environ, ICL_STORE_DIR=str(tmp_path / "store"), ICL_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", _EXPORT_SCRIPT], env=env, start_new_session=True)
    ckpt = tmp_path / "store" / "ckpt"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(list(ckpt.glob("*.pt"))) < 2 and proc.poll() is None:
        time.sleep(0.2)
    try:
        assert len(list(ckpt.glob("*.pt"))) == 2, "two ensembles should be in training, each checkpointed"
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    checkpoints = RunStore(tmp_path / "store").checkpoints()
    assert len(checkpoints) == 2 and all(c["resumable"] and 0 < c["step"] < 200_000 for c in checkpoints)
    assert not list(ckpt.glob("*.tmp*")) and not list((tmp_path / "store").glob("*.npz"))
