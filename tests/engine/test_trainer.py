"""Training engine: loss decreases, ensembles equal separate runs, checkpoints resume exactly,
divergence is reported, the run cache is shared and safe across processes."""

import dataclasses
import importlib
import multiprocessing as mp

import pytest
import torch

from icl_lib import (DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig, TrainingDiverged, train,
                     train_groups)
from icl_lib.engine.cache import RunCache
from icl_lib.engine.execution import Execution

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


def _same_runs(a, b):
    for x, y in zip(a, b, strict=True):
        for k in "QKVO":
            assert torch.equal(x.params[k], y.params[k]), k
        for k in ("train_loss", "val_loss", "KQ", "OV"):
            assert torch.equal(x.history[k], y.history[k]), k


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
def two_threads():
    """A lone model draws its next batch ahead only when torch has more than one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    yield
    torch.set_num_threads(threads)


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


# --------------------------------------------------------------------------- draw-ahead (the GPU's default)
def _steps_batches(trainer, steps):
    """Train ``steps`` steps, returning a copy of each step's batch tokens ``(R, B, D, L+1)``."""
    seen, draw = [], trainer.source.next

    def record(t):
        batch = draw(t)
        seen.append(batch.tokens.clone())
        return batch

    trainer.source.next = record
    trainer.run(until=steps)
    return seen


def test_draw_ahead_uses_each_drawn_batch_once_in_order():
    """With draw_ahead=K step t trains on slice t mod K of the K steps' batches drawn at once, each
    model from its own generators (the same numbers as drawing that model's K batches alone)."""
    from icl_lib.data import TaskSampler
    from icl_lib.seeding import make_generators

    specs = [spec(0, 1), spec(7, 2)]
    seen = _steps_batches(EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=4), 10)
    for r, s in enumerate(specs):
        gens = [make_generators(s.seed, "train", "cpu")]
        sampler = TaskSampler([s.data], dtype=torch.float64)
        drawn = torch.cat([sampler.sample(TINY.batch, gens, steps=4).tokens[0] for _ in range(3)])  # 12 steps
        for t in range(10):
            assert torch.equal(seen[t][r], drawn[t]), (r, t)
    assert not torch.equal(seen[0], seen[4])


def test_draw_ahead_steps_one_is_the_plain_draw():
    from icl_lib.data import TaskSampler
    from icl_lib.seeding import make_generators

    s = spec(3)
    sampler = TaskSampler([s.data, s.data], dtype=torch.float64)
    a = sampler.sample(TINY.batch, [make_generators(s.seed, "train", "cpu")] * 2, steps=1)
    b = sampler.sample(TINY.batch, [make_generators(s.seed, "train", "cpu")] * 2)
    assert a.tokens.shape == b.tokens.shape and torch.equal(a.tokens, b.tokens)


@pytest.mark.parametrize("stop_at", [10, 12])  # inside the third block of 4 steps, and at its start
def test_draw_ahead_resumes_exactly(tmp_path, stop_at):
    """A run with draw-ahead stopped mid-block and resumed from its checkpoint redraws that block:
    it ends bitwise where the uninterrupted run ends, as does a run trained in pieces."""
    specs = [spec(0, 2), spec(1, 3)]
    plain = EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=4).run()
    ckpt = tmp_path / "run.pt"
    first = EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False, draw_ahead=4)
    assert first.run(until=stop_at) is None and ckpt.exists()
    _same_runs(EnsembleTrainer(specs, "cpu", checkpoint=ckpt, progress=False, draw_ahead=4).run(), plain)
    pieces = EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=4)
    for until in (3, 4, 9, 30, 59):
        pieces.run(until=until)
    _same_runs(pieces.run(), plain)


def test_draw_ahead_trains_like_the_plain_draw():
    """Another order of the random numbers, the same training: final validation losses of five
    seeds agree with those of the plain draw within their seed-to-seed spread."""
    tc = dataclasses.replace(TINY, steps=300, lr=1e-2)
    specs = [spec(s, 2, train=tc) for s in range(5)]
    a = torch.tensor([r.val_loss for r in EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=1).run()])
    b = torch.tensor([r.val_loss for r in EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=16).run()])
    assert not torch.equal(a, b)
    assert abs(a.mean() - b.mean()) < 2 * (a.std() + b.std()) / 5**0.5


def test_draw_ahead_and_graph_reject_bad_values():
    for kw, text in (({"draw_ahead": 0}, "draw_ahead=0"), ({"draw_ahead": "x"}, "draw_ahead='x'"),
                     ({"draw_ahead": 2, "shards": 2}, "shards=2"), ({"graph": "yes"}, "graph='yes'"),
                     ({"graph": True}, "graph=True")):
        with pytest.raises(ValueError, match=text):
            EnsembleTrainer([spec(0), spec(1)], "cpu", progress=False, **kw)


# --------------------------------------------------------------------------- CUDA graphs
def _graph_stand_in(step):
    """A CPU stand-in for ``steps.capture_cuda_graph``: "capturing" keeps the step, each replay runs
    it with no gradient set (a replayed backward writes fresh gradients) and copies its loss into
    one static tensor (a replay overwrites the graph's static output).  What it checks on a CPU is
    the trainer's side of graph mode: warm-up, static buffers, the step counter on the device,
    checkpoints; what only a GPU checks is torch's capture itself (the tests further below)."""
    graph_step = step.__self__
    static = torch.full((graph_step.model.R,), float("nan"), dtype=graph_step.model.Q.dtype)

    def replay():
        graph_step.opt.zero_grad(set_to_none=True)
        static.copy_(step())

    return replay, static


def _graph_mode(specs, **kw):
    # graph=True is for CUDA devices (Execution.resolve refuses it on a CPU); an Execution built
    # directly puts a CPU trainer in graph mode, and the stand-in replaces the capture
    ex = Execution(torch.device("cpu"), draw_ahead=4, graph=True)
    return EnsembleTrainer(specs, progress=False, execution=ex, **kw)


def test_graph_mode_bookkeeping_gives_the_eager_numbers(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.import_module("icl_lib.engine.steps"), "capture_cuda_graph", _graph_stand_in)
    specs = [spec(0, 1), spec(1, 3)]
    eager = EnsembleTrainer(specs, "cpu", progress=False, draw_ahead=4).run()
    tr = _graph_mode(specs)
    runs = tr.run()
    assert tr.stepper.captured and tr.stepper.eager_steps == 3 and runs[0].meta["cuda_graph"]
    _same_runs(runs, eager)
    ckpt = tmp_path / "run.pt"
    for until in (2, 23, 41):  # stopped before and after the capture, resumed from the checkpoint
        assert _graph_mode(specs, checkpoint=ckpt).run(until=until) is None
    _same_runs(_graph_mode(specs, checkpoint=ckpt).run(), eager)


def test_graph_mode_reports_divergence_at_its_step(monkeypatch):
    monkeypatch.setattr(importlib.import_module("icl_lib.engine.steps"), "capture_cuda_graph", _graph_stand_in)
    tr = _graph_mode([spec(0)])
    tr.run(until=10)
    assert tr.stepper.captured
    with torch.no_grad():
        tr.model.V.fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match=r"step 10 .*lr=0.003"):
        tr.run()


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_cuda_graph_steps_equal_eager_steps(tmp_path):
    """Replaying the captured step gives the numbers of the eager steps (same kernels), also when
    the graph run is stopped and resumed from its checkpoint (it re-captures)."""
    tc = dataclasses.replace(TINY, steps=200, dtype="float32")
    specs = [spec(s, 1 + s % 4, train=tc) for s in range(6)]
    eager = EnsembleTrainer(specs, "cuda", progress=False, compile=False).run()
    graph = EnsembleTrainer(specs, "cuda", progress=False, graph=True)
    runs = graph.run()
    assert graph.stepper.captured, "the step was not captured"
    for a, b in zip(eager, runs):
        for k in "QKVO":
            torch.testing.assert_close(b.params[k], a.params[k], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(b.history["val_loss"], a.history["val_loss"], rtol=1e-5, atol=1e-6)
    ckpt = tmp_path / "run.pt"
    assert EnsembleTrainer(specs, "cuda", checkpoint=ckpt, progress=False, graph=True).run(until=77) is None
    _same_runs(EnsembleTrainer(specs, "cuda", checkpoint=ckpt, progress=False, graph=True).run(), runs)


@cuda
def test_cuda_graph_reports_divergence_at_its_step():
    """A loss that turns NaN inside a replayed step is reported with that step (device counter)."""
    tc = dataclasses.replace(TINY, steps=200, dtype="float32")
    tr = EnsembleTrainer([spec(0, train=tc)], "cuda", progress=False, graph=True)
    tr.run(until=10)
    assert tr.stepper.captured
    with torch.no_grad():
        tr.model.V.fill_(float("nan"))  # in place: the graph reads these parameters
    with pytest.raises(TrainingDiverged, match=r"step 10 .*lr=0.003"):
        tr.run()


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


def test_train_groups_trains_every_group_in_one_call_and_returns_them_by_key():
    tc = TrainConfig(steps=20, batch=8, lr=3e-3, n_log=4, val_size=32, dtype="float64")
    data = DataConfig(d=2, L=4)
    groups = {H: [RunSpec(data, ModelConfig(heads=H), tc, seed=k) for k in range(2)] for H in (2, 1)}
    specs = [s for group in groups.values() for s in group]
    runs = train_groups(groups, device="cpu", progress=False)
    assert list(runs) == [2, 1] and [r.spec for group in runs.values() for r in group] == specs
    again = train(specs, device="cpu", progress=False)  # the same runs, from the cache
    assert [r.val_loss for group in runs.values() for r in group] == [r.val_loss for r in again]


def test_the_validation_set_is_drawn_on_the_cpu_whatever_device_trains(monkeypatch):
    """One validation set per task: drawn from a CPU generator keyed by the task and moved to the
    device, so a run trained on a GPU is scored on the sequences a CPU run is."""
    from icl_lib.engine import trainer

    drawn_on = []
    real = trainer.generator

    def spy(seed, *names, device="cpu"):
        drawn_on.append(str(device))
        return real(seed, *names, device=device)

    monkeypatch.setattr(trainer, "generator", spy)
    cpu = trainer.validation_batch(spec(0), device="cpu")
    other = trainer.validation_batch(spec(7, heads=3), device=torch.device("cpu"))
    assert drawn_on == ["cpu", "cpu"]
    assert torch.equal(cpu.tokens, other.tokens) and torch.equal(cpu.beta, other.beta)  # the task's, not the seed's
    moved = trainer.validation_batch(spec(0), device="meta")  # another device: the same draw, moved there
    assert drawn_on[-1] == "cpu" and moved.tokens.device.type == "meta" and moved.tokens.shape == cpu.tokens.shape
    longer = trainer.validation_batch(RunSpec(data=DataConfig(d=3, L=12), model=ModelConfig(heads=2), train=TINY))
    assert longer.tokens.shape != cpu.tokens.shape


def test_chapter_9s_test_losses_read_one_set_per_task_whatever_trained_the_run():
    """The same trained model under two run specs that differ in seed only (as a CPU- and a
    GPU-trained seed would) gets the same test loss: the set depends on the task alone."""
    from icl_lib.paper1.trap import test_losses

    run = EnsembleTrainer([spec(3)], "cpu", progress=False).run()[0]
    twin = dataclasses.replace(run, spec=dataclasses.replace(run.spec, seed=4))
    a, b = test_losses([run, twin], n=512)
    assert a == b and test_losses([run], n=512)[0] == a
    other = test_losses([run], n=256)[0]
    assert other != a  # another size is another set
