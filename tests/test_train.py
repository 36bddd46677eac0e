"""Training engine: loss decreases, ensembles equal separate runs, checkpoints resume exactly,
divergence is reported, the run cache is shared and safe across processes."""

import dataclasses
import multiprocessing as mp

import pytest
import torch

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig, TrainingDiverged, train
from icl_lib.cache import RunCache

TINY = TrainConfig(steps=60, batch=32, lr=3e-3, n_log=6, val_size=256, dtype="float64")


def spec(seed=0, heads=2, **kw):
    return RunSpec(data=DataConfig(d=3, L=8), model=ModelConfig(heads=heads), train=kw.pop("train", TINY), seed=seed)


def test_short_run_lowers_loss():
    tc = dataclasses.replace(TINY, steps=300, lr=1e-2)
    run = EnsembleTrainer([spec(train=tc)], "cpu", progress=False).run()[0]
    v = run.history["val_loss"]
    assert v[-1] < 0.85 * v[0]
    assert run.history["step"][0] == 0 and run.history["step"][-1] == 300
    assert run.history["KQ"].shape == (len(v), 2, 4, 4) and run.history["OV"].shape == (len(v), 2, 1, 4)


def test_ensemble_equals_separate_runs():
    specs = [spec(0, 1), spec(1, 2), spec(2, 3)]
    together = EnsembleTrainer(specs, "cpu", progress=False).run()
    for s, run in zip(specs, together):
        alone = EnsembleTrainer([s], "cpu", progress=False).run()[0]
        for k in "QKVO":
            torch.testing.assert_close(run.params[k], alone.params[k], rtol=1e-9, atol=1e-11)
        torch.testing.assert_close(run.history["val_loss"], alone.history["val_loss"], rtol=1e-9, atol=1e-11)


def test_checkpoint_resume_equals_uninterrupted(tmp_path):
    s = spec(4, 2)
    full = EnsembleTrainer([s], "cpu", progress=False).run()[0]
    ckpt = tmp_path / "run.pt"
    assert EnsembleTrainer([s], "cpu", checkpoint=ckpt, progress=False).run(until=23) is None
    assert ckpt.exists()
    resumed_trainer = EnsembleTrainer([s], "cpu", checkpoint=ckpt, progress=False)
    assert resumed_trainer.step == 23
    resumed = resumed_trainer.run()[0]
    for k in "QKVO":
        torch.testing.assert_close(resumed.params[k], full.params[k], rtol=0, atol=0)
    torch.testing.assert_close(resumed.history["val_loss"], full.history["val_loss"], rtol=0, atol=0)


def test_checkpoint_of_other_runs_is_rejected(tmp_path):
    ckpt = tmp_path / "run.pt"
    EnsembleTrainer([spec(1)], "cpu", checkpoint=ckpt, progress=False).run(until=5)
    with pytest.raises(ValueError, match="checkpoint"):
        EnsembleTrainer([spec(2)], "cpu", checkpoint=ckpt, progress=False)


def test_divergence_names_step_and_lr():
    tc = dataclasses.replace(TINY, dtype="float32")  # 1e30 squared overflows float32
    bad = RunSpec(data=DataConfig(d=3, L=8), model=ModelConfig(heads=2, init_scale=1e30), train=tc)
    with pytest.raises(TrainingDiverged, match=r"step 0 .*lr=0.003"):
        EnsembleTrainer([bad], "cpu", progress=False).run()


def test_mixed_groups_and_cache(tmp_path):
    specs = [spec(0, 2), RunSpec(data=DataConfig(d=3, L=6), model=ModelConfig(heads=1), train=TINY), spec(0, 2)]
    runs = train(specs, device="cpu", progress=False)
    assert runs[0].spec == specs[0] and runs[1].spec.data.L == 6
    assert runs[0] is runs[2]  # one training for duplicate specs
    again = train(specs[:2], device="cpu", progress=False)
    assert all(r.meta.get("cached") for r in again)
    torch.testing.assert_close(again[0].params["Q"], runs[0].params["Q"])
    assert not list((RunCache().root / "ckpt").glob("*.pt"))  # checkpoints removed after success


def _train_in_process(cache_dir, queue):
    import os

    os.environ["ICL_CACHE_DIR"] = cache_dir
    run = train([spec(9, 2)], device="cpu", progress=False)[0]
    queue.put((bool(run.meta.get("cached")), run.params["Q"].sum().item()))


def test_two_processes_train_once(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_train_in_process, args=(str(tmp_path / "shared"), q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = [q.get(timeout=5) for _ in procs]
    assert sorted(c for c, _ in results) == [False, True]  # one trained, the other loaded
    assert results[0][1] == results[1][1]


def test_cache_key_changes_with_config():
    assert spec(0).key() != spec(1).key()
    assert spec(0).key() != spec(0, 3).key()
    assert spec(0).key("cpu") != spec(0).key("cuda")
    assert spec(0).key() == spec(0).key()


def test_progress_bar_follows_icl_progress(monkeypatch, capsys):
    # the book build sets ICL_PROGRESS=0: no bar, so no second output in a chapter's figure cell
    monkeypatch.setenv("ICL_PROGRESS", "0")
    trainer = EnsembleTrainer([spec()], "cpu")
    assert trainer.progress is False
    trainer.run()
    assert "train R=1" not in capsys.readouterr().err
    monkeypatch.delenv("ICL_PROGRESS")
    assert EnsembleTrainer([spec()], "cpu").progress is True
    assert EnsembleTrainer([spec()], "cpu", progress=False).progress is False
