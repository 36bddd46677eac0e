"""The trainer under each execution: batches drawn ahead (the GPU's default) and steps
replayed as CUDA graphs."""

import dataclasses
import importlib

import pytest
import torch

from icl_lib import (
    DataConfig,
    EnsembleTrainer,
    ModelConfig,
    RunSpec,
    TrainConfig,
    TrainingDiverged,
    train,
    train_groups,
)
from icl_lib.engine.execution import Execution
from tests.engine.trainer_common import TINY, _same_runs, spec



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
    from icl_lib.sampling import TaskSampler
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
    from icl_lib.sampling import TaskSampler
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
    from icl_lib.paper1.phase_diagram.trap import test_losses

    run = EnsembleTrainer([spec(3)], "cpu", progress=False).run()[0]
    twin = dataclasses.replace(run, spec=dataclasses.replace(run.spec, seed=4))
    a, b = test_losses([run, twin], n=512)
    assert a == b and test_losses([run], n=512)[0] == a
    other = test_losses([run], n=256)[0]
    assert other != a  # another size is another set
