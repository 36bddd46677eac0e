"""Training engine: loss decreases, ensembles equal separate runs, checkpoints resume exactly,
divergence is reported, the run cache is shared and safe across processes."""

import dataclasses
import multiprocessing as mp

import pytest
import torch

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig, TrainingDiverged, train
from icl_lib.engine.cache import RunCache
from tests.engine.trainer_common import TINY, _same_runs, spec



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


def test_cpu_shards_give_the_same_numbers_as_one_thread():
    """Shards train single-threaded in parallel: bitwise the numbers of a one-thread plain loop,
    whatever the number of shards, and torch's thread count is restored afterwards."""
    specs = [spec(s, 1 + s % 3) for s in range(5)]
    threads = torch.get_num_threads()
    two = EnsembleTrainer(specs, "cpu", progress=False, shards=2)
    assert len(two.stepper.shards) == 2
    two = two.run()
    assert torch.get_num_threads() == threads
    five = EnsembleTrainer(specs, "cpu", progress=False, shards=5).run()
    torch.set_num_threads(1)
    try:
        plain = EnsembleTrainer(specs, "cpu", progress=False, shards=1).run()
    finally:
        torch.set_num_threads(threads)
    _same_runs(two, five)
    _same_runs(two, plain)


def test_sharded_checkpoint_resume_equals_uninterrupted(tmp_path):
    specs = [spec(7, 2), spec(8, 3), spec(9, 1)]
    full = EnsembleTrainer(specs, "cpu", progress=False, shards=2).run()
    ckpt = tmp_path / "run.pt"
    assert EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False, shards=3).run(until=17) is None
    resumed = EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False, shards=2).run()
    _same_runs(full, resumed)


def _one_thread_runs(specs, **kw):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return EnsembleTrainer(specs, "cpu", progress=False, shards=1, **kw).run()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def two_threads(torch_threads):
    """A lone model draws its next batch ahead only when torch has more than one thread."""
    torch_threads(max(2, torch.get_num_threads()))


def test_lone_model_draws_ahead_with_the_numbers_of_one_thread(two_threads, tmp_path):
    """One model on two threads samples the next batch while it computes: bitwise the numbers of
    a one-thread loop, also when every step checkpoints (each cancels the batch drawn ahead) and
    when trained in pieces."""
    specs = [spec(3, 2)]
    plain = _one_thread_runs(specs)
    _same_runs(EnsembleTrainer(specs, "cpu", progress=False).run(), plain)
    every = EnsembleTrainer(specs, "cpu", checkpoint=tmp_path / "c.pt", checkpoint_every=0.0, progress=False)
    _same_runs(every.run(), plain)
    tr = EnsembleTrainer(specs, "cpu", progress=False)
    assert tr.run(until=23) is None and tr.run(until=40) is None
    _same_runs(tr.run(), plain)


def test_lone_model_interrupted_while_drawing_ahead_resumes_exactly(two_threads, tmp_path):
    import threading

    specs = [spec(4, 3)]
    plain = _one_thread_runs(specs)
    ckpt = tmp_path / "run.pt"
    stop = threading.Event()
    tr = EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False)
    record = tr._record

    def record_then_stop(step, loss, *snapshot):  # stop after a logged step, with the next batch drawn ahead
        record(step, loss, *snapshot)
        if step >= 20:
            stop.set()

    tr._record = record_then_stop
    with pytest.raises(KeyboardInterrupt):
        tr.run(stop=stop)
    assert 20 < tr.step < TINY.steps
    _same_runs(EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False).run(), plain)


@pytest.mark.parametrize("models", [1, 3])
def test_ctrl_c_mid_step_resumes_exactly(two_threads, tmp_path, models):
    """Ctrl-C (SIGINT) in the middle of a step ends the step first: the checkpoint then resumes
    to the numbers of an uninterrupted run (a batch already drawn is not skipped)."""
    import signal

    specs = [spec(10 + r, 1 + r) for r in range(models)]
    plain = EnsembleTrainer(specs, "cpu", progress=False).run()
    ckpt = tmp_path / "run.pt"
    tr = EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False)
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job
    mark_bad = tr.watch.mark

    def interrupt_mid_step(loss, step):  # after this step's batch was drawn, before its update
        mark_bad(loss, step)
        if step >= 20:
            signal.raise_signal(signal.SIGINT)

    tr.watch.mark = interrupt_mid_step
    with pytest.raises(KeyboardInterrupt):
        tr.run()
    assert 20 < tr.step < TINY.steps
    assert signal.getsignal(signal.SIGINT) is before  # the trainer's handler is removed again
    _same_runs(EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False).run(), plain)


def test_small_ensembles_train_side_by_side_with_the_same_numbers():
    """train() runs small groups one per thread; a model's numbers equal its sharded training."""
    g1 = [spec(0, 2), spec(1, 3)]
    g2 = [RunSpec(data=DataConfig(d=3, L=6), model=ModelConfig(heads=2), train=TINY, seed=s) for s in (2, 3)]
    runs = train(g1 + g2, device="cpu", cache=False, progress=False)
    alone = EnsembleTrainer(g1, "cpu", progress=False, shards=2).run() + EnsembleTrainer(g2, "cpu", progress=False, shards=2).run()
    _same_runs(runs, alone)


def test_schedule_puts_dominant_ensembles_alone():
    from icl_lib.engine.training import schedule as _schedule

    big = [spec(s) for s in range(6)]
    small = [RunSpec(data=DataConfig(d=3, L=6), model=ModelConfig(heads=2), train=TINY, seed=s) for s in range(2)]
    todo = {f"k{i}": s for i, s in enumerate(big + small)}
    chunks = [[f"k{i}" for i in range(6)], ["k6"], ["k7"]]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        solo, together = _schedule(chunks, todo, torch.device("cpu"))
        assert solo == [chunks[0]] and together == [["k6"], ["k7"]]
        solo, together = _schedule(chunks[1:], todo, torch.device("cpu"))
        assert solo == [] and together == [["k6"], ["k7"]]
        torch.set_num_threads(1)
        assert _schedule(chunks, todo, torch.device("cpu"))[1] == []
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("shards", [0, 4, 2.5])
def test_bad_shards_are_rejected(shards):
    with pytest.raises(ValueError, match="shards"):
        EnsembleTrainer([spec(0), spec(1), spec(2)], "cpu", progress=False, shards=shards)


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
    state = torch.load(ckpt, weights_only=True)
    state["code"] = "0"  # written by other model code: its numbers would not continue this code's
    torch.save(state, ckpt)
    with pytest.raises(ValueError, match="checkpoint code='0' is invalid"):
        EnsembleTrainer([spec(1)], "cpu", checkpoint=ckpt, progress=False)


def test_divergence_names_step_and_lr():
    tc = dataclasses.replace(TINY, dtype="float32")  # 1e30 squared overflows float32
    bad = RunSpec(data=DataConfig(d=3, L=8), model=ModelConfig(heads=2, init_scale=1e30), train=tc)
    with pytest.raises(TrainingDiverged, match=r"step 0 .*lr=0.003"):
        EnsembleTrainer([bad], "cpu", progress=False).run()


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_divergence_by_the_loss_is_reported_and_not_cached(optimizer):
    """lr = 5 blows the loss up by orders of magnitude without always making it non-finite (the
    previous code trained such an Adam run to a final loss 36 times that of predicting 0 and
    cached it): it is reported with its step, and nothing is stored."""
    from icl_lib.engine.cache import RunCache

    tc = TrainConfig(steps=60, batch=64, lr=5.0, n_log=4, val_size=256, optimizer=optimizer)
    specs = [RunSpec(data=DataConfig(d=5, L=20), model=ModelConfig(heads=4), train=tc, seed=s) for s in range(2)]
    with pytest.raises(TrainingDiverged, match=r"training diverged: the training loss at step \d+ was .*lr=5.0"):
        train(specs, device="cpu", progress=False)
    assert not list(RunCache().root.glob("*.pt"))


def test_final_loss_far_above_predicting_zero_is_divergence():
    """The final rule on its own: a validation loss above twice that of predicting 0 is refused."""
    from icl_lib.engine.steps import DivergenceWatch

    watch = DivergenceWatch([spec(0), spec(1)], torch.tensor([1.1, 1.1]))
    watch.check_final(torch.tensor([0.3, 2.19]))  # 1.99 times: accepted
    with pytest.raises(TrainingDiverged, match=r"final validation loss was 2.31, 2.1 times .*seed=1"):
        watch.check_final(torch.tensor([0.3, 2.31]))
    with pytest.raises(TrainingDiverged, match="seed=0"):
        watch.check_final(torch.tensor([float("nan"), 0.3]))
    watch.mark(torch.tensor([1.0, 1200.0]), 7)  # 1091 times at step 7
    watch.mark(torch.tensor([1.0, 5000.0]), 8)  # the first step is kept
    with pytest.raises(TrainingDiverged, match=r"step 7 was 1200, 1.09e\+03 times"):
        watch.check()


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
    assert spec(0).key("cuda", 32) != spec(0).key("cuda") and spec(0).key("cpu", 1) == spec(0).key("cpu")
