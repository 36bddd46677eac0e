"""The fused CPU backend (icl_lib.engine.fused): the same model, loss and optimiser as the eager
step, its own random numbers, resumable and independent of its threads."""

import dataclasses

import numpy as np
import pytest
import torch
from scipy import stats

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig, train
from icl_lib.engine.fused_random import CH, normals, philox4x32
from icl_lib.engine.execution import Execution
from icl_lib.engine.fused import FusedProgram, fused_keys
from icl_lib.engine.run import empty_model
from icl_lib.seeding import make_generators

KINDS = ("softmax", "linear", "one_plus_tanh", "quadratic", "square")
# fused against autograd on one batch: float64 within a few ulps of the values, float32 within the
# rounding of a float32 sum of ~10^3 terms (torch's own float32 sits as far from its float64)
TOL = {torch.float64: 1e-13, torch.float32: 2e-6}


def _program(specs, dtype, threads=1):
    model = empty_model(specs, "cpu", dtype)
    model.reset_parameters([make_generators(s.seed, "init", "cpu", 1)[0] for s in specs],
                           [s.model.init_scale for s in specs])
    return FusedProgram(model, specs, threads=threads)


def _grad_gaps(specs, dtype, step=3):
    prog = _program(specs, dtype)
    loss = prog.grads(step)
    fused = [p.grad.clone() for p in prog.params]
    batch = prog.batch(step)  # the same sequences, drawn again, for autograd
    for p in prog.params:
        p.grad = None
    ref = prog.model.loss(batch)
    ref.sum().backward()
    gaps = [float((a - p.grad).abs().max() / p.grad.abs().max()) for a, p in zip(fused, prog.params)]
    ref = ref.detach().double()
    return float((loss - ref).abs().max() / ref.abs().max()), gaps


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", KINDS)
def test_fused_loss_and_gradients_equal_autograd(kind, dtype):
    # mixed head counts in one ensemble, and a batch that is not a multiple of the work item
    tc = TrainConfig(steps=10, batch=CH + 7, dtype=str(dtype).removeprefix("torch."))
    specs = [RunSpec(DataConfig(d=3, L=7, sigma2=0.1), ModelConfig(heads=h, attention=kind), tc, seed=s)
             for h, s in ((1, 0), (3, 1), (2, 2))]
    loss_gap, gaps = _grad_gaps(specs, dtype)
    assert loss_gap < TOL[dtype] and max(gaps) < TOL[dtype], (loss_gap, gaps)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_gradients_with_covariance_and_tasks(dtype):
    tc = TrainConfig(steps=10, batch=40, dtype=str(dtype).removeprefix("torch."))
    specs = [RunSpec(DataConfig(d=4, L=6, supports=[[0, 1, 2], [1, 2, 3]]), ModelConfig(heads=3), tc, seed=5),
             RunSpec(DataConfig(d=4, L=6, rho=0.5, supports=[[0, 1], [2, 3]]), ModelConfig(heads=2), tc, seed=6),
             RunSpec(DataConfig(d=4, L=6, sigma2=0.3, covariance=np.diag([1.0, 2.0, 0.5, 1.5]).tolist(),
                                supports=[[0, 1, 2, 3], [3]]), ModelConfig(heads=1), tc, seed=7)]
    loss_gap, gaps = _grad_gaps(specs, dtype)
    assert loss_gap < TOL[dtype] and max(gaps) < TOL[dtype], (loss_gap, gaps)


def test_philox_known_answers():
    """Random123's known-answer vectors of Philox4x32-10 (counter, key, result)."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, out in cases:
        assert tuple(int(v) for v in philox4x32(*ctr, *key)) == out


def test_fused_normals_are_standard_normal_and_reproducible():
    z = np.concatenate([normals(11, 22, step, item, 2000).ravel() for step in range(4) for item in range(4)])
    n = z.size  # 512,000
    assert abs(z.mean()) < 5 / n**0.5
    assert abs(z.var() - 1) < 5 * (2 / n) ** 0.5
    assert abs(stats.skew(z)) < 5 * (6 / n) ** 0.5
    assert abs(stats.kurtosis(z)) < 5 * (24 / n) ** 0.5
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert np.array_equal(normals(11, 22, 3, 2, 100), normals(11, 22, 3, 2, 100))


def test_fused_normals_are_independent_across_models_steps_items_and_lanes():
    base = normals(1, 2, 5, 0, 4000)  # (4000, CH): lanes are the columns
    others = {"model": normals(3, 2, 5, 0, 4000), "step": normals(1, 2, 6, 0, 4000),
              "item": normals(1, 2, 5, 1, 4000), "lane": np.roll(base, 1, axis=1),
              "next number": np.roll(base, 1, axis=0)}
    bound = 5 / base.size**0.5  # correlation of independent normals: about N(0, 1/n)
    for what, z in others.items():
        r = float(np.corrcoef(base.ravel(), z.ravel())[0, 1])
        assert abs(r) < bound, (what, r)
    # a pair of rows comes from one radius: their squares must not be correlated either
    r2 = float(np.corrcoef(base[0::2].ravel() ** 2, base[1::2].ravel() ** 2)[0, 1])
    assert abs(r2) < 5 / base[0::2].size ** 0.5


def test_fused_batches_follow_the_task():
    """The data of a fused batch: y = beta^T x + noise with beta on the task's support, x ~ N(0, Sigma)."""
    cov = [[1.0, 0.6, 0.0], [0.6, 2.0, 0.3], [0.0, 0.3, 0.5]]
    spec = RunSpec(DataConfig(d=3, L=20, sigma2=0.25, covariance=cov, supports=[[0, 2], [1]]), ModelConfig(heads=1),
                   TrainConfig(steps=1, batch=CH * 40, dtype="float64"), seed=3)
    b = _program([spec], torch.float64).batch(0).member(0)
    x = b.x.reshape(-1, 3)
    assert torch.allclose(torch.cov(x.T), torch.tensor(cov, dtype=torch.float64), atol=0.05)
    assert bool((b.beta[:, 0, 1] == 0).all() and (b.beta[:, 1, [0, 2]] == 0).all())
    noise = b.y - torch.einsum("bld,bnd->bln", b.x, b.beta)
    assert abs(float(noise.var()) - 0.25) < 0.02
    assert abs(float((b.beta[:, 0] ** 2).sum(-1).mean()) - 1.0) < 0.1  # beta_n ~ N(0, I / |S_n|)


def _small(seeds, steps=60, heads=(1, 2, 3), **data):
    tc = TrainConfig(steps=steps, batch=48, lr=3e-3, n_log=6, val_size=64)
    return [RunSpec(DataConfig(d=3, L=8, **data), ModelConfig(heads=h), tc, seed=s)
            for s, h in zip(seeds, heads * len(seeds))]


def test_fused_run_resumes_bitwise_and_does_not_depend_on_threads(tmp_path):
    specs = _small(range(3))
    whole = EnsembleTrainer(specs, "cpu", progress=False, backend="fused").run()
    ckpt = tmp_path / "c.pt"
    EnsembleTrainer(specs, "cpu", progress=False, backend="fused", checkpoint=ckpt).run(until=23)
    again = EnsembleTrainer(specs, "cpu", progress=False, backend="fused", checkpoint=ckpt)
    assert again.step == 23
    resumed = again.run()
    one_thread = EnsembleTrainer(specs, "cpu", progress=False, backend="fused", shards=1).run()
    for runs in (resumed, one_thread):
        for a, b in zip(whole, runs):
            assert all(torch.equal(a.params[k], b.params[k]) for k in "QKVO")
            assert torch.equal(a.history["val_loss"], b.history["val_loss"])
            assert torch.equal(a.history["train_loss"], b.history["train_loss"])
    # and a model trains to the same numbers alone as in the ensemble
    alone = EnsembleTrainer(specs[1:2], "cpu", progress=False, backend="fused").run()[0]
    assert all(torch.equal(alone.params[k], whole[1].params[k]) for k in "QKVO")


@pytest.mark.parametrize("R, val_size", [(2, 3000), (1, 40_000)])
def test_on_two_threads_the_history_uses_them_and_keeps_the_one_thread_numbers(R, val_size, monkeypatch,
                                                                               torch_threads):
    """A fused step on two threads leaves torch its threads where it trains several models, so the
    history's validation loss (the training loop's only torch op) runs on the cores the step uses;
    a step on one thread, or of a lone model, gives torch one.  Every number is the one-thread
    run's."""
    tc = TrainConfig(steps=8, batch=128, n_log=4, val_size=val_size)
    specs = [RunSpec(DataConfig(d=5, L=12), ModelConfig(heads=h), tc, seed=s) for s, h in ((0, 4), (1, 2))][:R]
    seen = []
    snapshot = EnsembleTrainer.snapshot
    monkeypatch.setattr(EnsembleTrainer, "snapshot", lambda self: (seen.append(torch.get_num_threads()), snapshot(self))[1])
    torch_threads(2)
    runs = {}
    for shards in (2, 1):
        trainer = EnsembleTrainer(specs, "cpu", progress=False, backend="fused", shards=shards)
        history_threads = shards if R > 1 else 1
        assert trainer.stepper.single_threaded == (history_threads == 1)
        seen.clear()
        runs[shards] = trainer.run()
        assert set(seen) == {history_threads}, seen
    for a, b in zip(runs[2], runs[1]):
        assert all(torch.equal(a.params[k], b.params[k]) for k in "QKVO")
        assert torch.equal(a.history["val_loss"], b.history["val_loss"])
        assert torch.equal(a.history["train_loss"], b.history["train_loss"])


@pytest.mark.parametrize("R, heads, L, tasks, attention", [
    (2, 4, 40, 1, "softmax"), (5, 3, 120, 1, "softmax"), (16, 8, 5, 1, "one_plus_tanh"), (3, 2, 60, 2, "linear"),
    (1, 4, 40, 1, "softmax")])
def test_the_validation_loss_of_several_models_is_the_same_on_one_thread_and_on_two(R, heads, L, tasks, attention,
                                                                                    torch_threads):
    """Why a fused step on two threads may leave torch its threads while it trains several models:
    the history's validation loss (shared data, 40,000 sequences) has the same bits on one torch
    thread and on two; a lone model's has not always (its mean is one output, which torch splits
    between threads), and its step gives torch one thread."""
    from icl_lib.engine.trainer import validation_batch

    data = DataConfig(d=4, L=L, supports=[[0, 1], [2, 3]] if tasks == 2 else None)
    tc = TrainConfig(val_size=40_000)
    specs = [RunSpec(data, ModelConfig(heads=heads, attention=attention, init_scale=2.0), tc, seed=s)
             for s in range(R)]
    model = empty_model(specs, "cpu", torch.float32)
    model.reset_parameters([make_generators(s.seed, "init", "cpu", 1)[0] for s in specs],
                           [s.model.init_scale for s in specs])
    val = validation_batch(specs[0], "cpu", torch.float32)
    losses = {}
    with torch.no_grad():
        for threads in (1, 2):
            torch_threads(threads)
            losses[threads] = model.loss(val)
    assert bool(torch.isfinite(losses[1]).all())
    if R > 1:
        assert torch.equal(losses[1], losses[2])
    else:  # the same number to float32's rounding of a sum; its last bits are not promised
        assert torch.allclose(losses[1], losses[2], rtol=1e-5, atol=0.0)


def test_two_threads_share_the_work_items_also_from_numbas_cache():
    """A program of two threads runs its items on two threads (each thread's CPU time), whichever of
    the parallel and the one-thread step numba compiled and cached first: they are two functions,
    so neither loads the other's code (the parallel step once ran on one thread that way)."""
    import os

    from icl_lib.engine import fused_kernels as K

    assert K.step_grads.py_func.__qualname__ != K.step_grads_serial.py_func.__qualname__
    import numba

    if not os.path.isdir("/proc/self/task") or numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("per-thread CPU times are read from Linux's /proc, on two CPUs or more")
    tc = TrainConfig(steps=10, batch=256)
    specs = [RunSpec(DataConfig(d=5, L=40), ModelConfig(heads=4), tc, seed=s) for s in range(16)]
    one, two = _program(specs, torch.float32, threads=1), _program(specs, torch.float32, threads=2)

    def ticks():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
            out[tid] = int(fields[11]) + int(fields[12])
        return out

    one.use_threads()
    one.grads(1)
    two.use_threads()
    before = ticks()
    for t in range(60):
        two.grads(t)
    spent = sorted((n - before.get(tid, 0) for tid, n in ticks().items()), reverse=True)
    assert spent[1] >= 0.25 * sum(spent), spent  # the second-busiest thread did a share of the items
    one.use_threads()


def test_fused_adam_is_torchs_adam():
    """One fused step moves the parameters as torch's Adam does with the same gradients."""
    spec = _small([0], heads=(2,))[0]
    tr = EnsembleTrainer([spec], "cpu", progress=False, backend="fused")
    before = [p.detach().clone() for p in tr.stepper.program.params]
    tr.run(until=2)
    fused = [p.detach().clone() for p in tr.stepper.program.params]
    ps = [b.clone().requires_grad_() for b in before]
    opt = torch.optim.Adam(ps, lr=spec.train.lr)
    for t in range(2):
        prog = tr.stepper.program
        with torch.no_grad():
            for p, q in zip(prog.params, ps):
                p.copy_(q)
        prog.grads(t)
        for p, q in zip(prog.params, ps):
            q.grad = p.grad.clone()
        opt.step()
    assert max(float((a - b.detach()).abs().max()) for a, b in zip(fused, ps)) < 1e-6
    assert int(tr.opt.state[tr.model.Q]["step"]) == 2


def test_fused_key_differs_from_eager_and_the_cache_never_mixes_them(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path))
    spec = _small([4], steps=20)[0]
    fused_key = Execution.resolve("cpu", backend="fused").run_key(spec)
    eager_key = Execution.resolve("cpu", backend="eager").run_key(spec)
    assert fused_key != eager_key and eager_key == spec.key("cpu")  # the eager keys of stored runs are unchanged
    import icl_lib.config as config

    monkeypatch.setattr(config, "FUSED_CODE_VERSION", "another")  # new fused numerics: new keys, eager ones kept
    assert spec.key("cpu", backend="fused") != fused_key and spec.key("cpu") == eager_key
    monkeypatch.undo()
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ICL_BACKEND", "eager")
    f = train([spec], "cpu", progress=False, backend="fused", use_store=False)[0]
    e = train([spec], "cpu", progress=False, backend="eager", use_store=False)[0]
    assert f.meta["backend"] == "fused" and e.meta["backend"] == "eager" and e.source == "trained"
    assert train([spec], "cpu", progress=False, backend="fused", use_store=False)[0].source == "cache"


def test_fused_backend_is_refused_where_it_cannot_run(monkeypatch):
    with pytest.raises(ValueError, match="backend='gpu' is invalid"):
        Execution.resolve("cpu", backend="gpu")
    monkeypatch.setenv("ICL_BACKEND", "gpu")
    with pytest.raises(ValueError, match="ICL_BACKEND='gpu' is invalid"):
        Execution.resolve("cpu")
    monkeypatch.setenv("ICL_BACKEND", "fused")
    assert Execution.resolve("cpu").backend == "fused"
    with pytest.raises(ValueError, match="draw_ahead=4 is invalid with backend='fused'"):
        Execution.resolve("cpu", draw_ahead=4, backend="fused")


@pytest.mark.parametrize("cause", ["arm", "no compiler"])
def test_where_the_fused_kernels_cannot_run_training_falls_back_to_the_eager_engine(cause, tmp_path, monkeypatch,
                                                                                   caplog):
    """On an ARM CPU, or where numba cannot compile the kernels, ``fused`` and ``auto`` train with
    the eager engine, keyed and recorded as eager runs, and one logged line says so."""
    import logging

    import icl_lib.engine.fused_random as fr
    from icl_lib.engine import execution

    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ICL_BACKEND", raising=False)
    monkeypatch.setattr(execution, "_FALLBACK_LOGGED", False)
    if cause == "arm":
        monkeypatch.setattr(execution.platform, "machine", lambda: "aarch64")
    else:
        def broken(*args):
            raise RuntimeError("no LLVM here")

        monkeypatch.setattr(fr, "normals", broken)
    execution.fused_unavailable.cache_clear()
    try:
        spec = _small([4], steps=20)[0]
        with caplog.at_level(logging.WARNING, logger=execution.__name__):
            for backend in ("auto", "fused", "fused"):
                ex = Execution.resolve("cpu", backend=backend)
                assert ex.backend == "eager" and ex.run_key(spec) == spec.key("cpu"), backend
            run = train([spec], "cpu", progress=False, backend="fused", use_store=False)[0]
        assert run.meta["backend"] == "eager" and run.source == "trained"
        eager = EnsembleTrainer([spec], "cpu", progress=False, backend="eager").run()[0]
        assert all(torch.equal(run.params[k], eager.params[k]) for k in "QKVO")
        lines = [r.getMessage() for r in caplog.records if "eager engine" in r.getMessage()]
        assert len(lines) == 1 and ("aarch64" if cause == "arm" else "no LLVM here") in lines[0], lines
        assert "\n" not in lines[0]
    finally:
        monkeypatch.undo()
        execution.fused_unavailable.cache_clear()
    assert Execution.resolve("cpu", backend="fused").backend == "fused"  # this machine runs them


def test_fused_and_eager_training_give_the_same_outcomes():
    """Over 16 seeds of a short plan, the two backends' final losses, |omega| and pattern (heads of
    both signs) come from the same distributions (two-sample tests at level 0.01; Fisher's exact
    test for the pattern): they train the same model on the same task with other random numbers."""
    tc = TrainConfig(steps=400, batch=64, lr=3e-3, n_log=4, val_size=512)
    specs = [RunSpec(DataConfig(d=3, L=12), ModelConfig(heads=2), tc, seed=100 + s) for s in range(16)]
    out = {b: EnsembleTrainer(specs, "cpu", progress=False, backend=b).run() for b in ("eager", "fused")}
    loss = {b: [r.val_loss for r in runs] for b, runs in out.items()}
    omega = {b: [float(r.omega.abs().max()) for r in runs] for b, runs in out.items()}
    both = {b: sum(r.pattern().kind == "pos/neg" for r in runs) for b, runs in out.items()}
    assert stats.mannwhitneyu(loss["eager"], loss["fused"]).pvalue > 0.01, loss
    assert stats.ks_2samp(omega["eager"], omega["fused"]).pvalue > 0.01, omega
    table = [[both["eager"], 16 - both["eager"]], [both["fused"], 16 - both["fused"]]]
    assert stats.fisher_exact(table).pvalue > 0.01, table


def test_store_export_with_the_fused_backend_stores_runs_that_verify(tmp_path, monkeypatch):
    """``store export --backend fused``: its entries name the backend in their provenance, their
    early checkpoints retrain here (with that backend) to within the CPU tolerance, and a build
    finds them by spec whatever its own backend."""
    from icl_lib.engine.store import CPU_TOLERANCE, RunStore
    from icl_lib.book.plan_training import store_plan

    monkeypatch.setenv("ICL_STORE_DIR", str(tmp_path / "store"))
    plan = {"ch": _small([0, 1], steps=50, heads=(1, 2))}
    status = store_plan(plan, early_step=20, device="cpu", command="test", progress=False, backend="fused")
    assert status["complete"] and status["stored"] == 2
    store = RunStore()
    for s in plan["ch"]:
        assert store.entry(s).provenance["backend"] == "fused"
        v = store.verify_early(s)
        assert v["ok"] and v["max_param_gap"] < CPU_TOLERANCE, v
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "fresh"))
    runs = train(plan["ch"], "cpu", progress=False, backend="eager")
    assert all(r.source == "store" and r.meta["backend"] == "fused" for r in runs)


@pytest.mark.parametrize("backend", ["fused", "eager"])
def test_a_data_seed_keeps_the_initialisation_and_changes_only_the_data(backend):
    base = _small([4])[0]
    other = dataclasses.replace(base, data_seed=9)
    same = dataclasses.replace(base, data_seed=base.seed)  # the seed's own stream: the same experiment
    assert same == base and same.to_dict() == base.to_dict() and "data_seed" not in base.to_dict()
    assert RunSpec.from_dict(other.to_dict()) == other and other.key() != base.key()
    a, b = EnsembleTrainer([base, other], "cpu", progress=False, backend=backend).run()
    assert torch.equal(a.history["KQ"][0], b.history["KQ"][0])  # one initialisation
    assert not torch.equal(a.params["Q"], b.params["Q"])  # two data streams
    # the data stream is that of a run whose seed is the data seed
    twin = dataclasses.replace(base, seed=9)
    assert other.stream_seed == twin.stream_seed == 9
    assert np.array_equal(fused_keys([other]), fused_keys([twin]))


@pytest.mark.parametrize("backend", ["fused", "eager"])
def test_the_form_31_trains_only_the_scales_from_the_projected_initialisation(backend, tmp_path):
    from icl_lib.circuits import mu_of, omega_of

    full = _small([5, 6], steps=40, heads=(2,))
    form = [dataclasses.replace(s, model=dataclasses.replace(s.model, form="3.1")) for s in full]
    assert form[0].key() != full[0].key() and "form" not in full[0].to_dict()["model"]
    assert RunSpec.from_dict(form[0].to_dict()) == form[0]
    runs = EnsembleTrainer(form, "cpu", progress=False, backend=backend).run()
    bases = EnsembleTrainer(full, "cpu", progress=False, backend=backend).run()
    d = 3
    for run, base in zip(runs, bases):
        KQ, OV = run.history["KQ"], run.history["OV"]  # (T, H, D, D), (T, H, 1, D)
        # step 0: the full run's initialisation projected on the form
        assert torch.allclose(omega_of(KQ[0], d), omega_of(base.history["KQ"][0], d), atol=1e-6)
        assert torch.allclose(mu_of(OV[0], d), mu_of(base.history["OV"][0], d), atol=1e-6)
        for t in range(len(KQ)):  # every snapshot has the form's circuits
            w = omega_of(KQ[t], d)
            want = torch.zeros_like(KQ[t])
            want[:, :d, :d] = w[:, None, None] * torch.eye(d)
            assert torch.allclose(KQ[t], want, atol=1e-6)
            assert torch.allclose(OV[t, :, 0, :-1], torch.zeros_like(OV[t, :, 0, :-1]), atol=1e-7)
        assert not torch.allclose(omega_of(KQ[-1], d), omega_of(KQ[0], d))  # the scales moved
    # resumed from a checkpoint to the numbers of an uninterrupted run
    ckpt = tmp_path / "form.pt"
    EnsembleTrainer(form, "cpu", progress=False, backend=backend, checkpoint=ckpt).run(until=17)
    again = EnsembleTrainer(form, "cpu", progress=False, backend=backend, checkpoint=ckpt).run()
    for a, b in zip(runs, again):
        assert all(torch.equal(a.params[k], b.params[k]) for k in "QKVO")


def test_the_form_31_is_refused_where_it_does_not_apply():
    with pytest.raises(ValueError, match="form"):
        ModelConfig(heads=2, form="diagonal")
    with pytest.raises(ValueError, match="form"):
        ModelConfig(heads=2, attention="linear", form="3.1")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_covariates_on_the_sphere_on_both_backends(dtype):
    d = 3
    sphere = DataConfig(d=d, L=8, covariates="sphere")
    assert "covariates" not in RunSpec().to_dict()["data"] and RunSpec(sphere).to_dict()["data"]["covariates"]
    specs = [RunSpec(sphere, ModelConfig(heads=2), TrainConfig(steps=5, batch=70, n_log=2, val_size=16), seed=s)
             for s in (1, 2)] + [RunSpec(DataConfig(d=d, L=8), ModelConfig(heads=2),
                                         TrainConfig(steps=5, batch=70, n_log=2, val_size=16), seed=3)]
    prog = _program(specs, dtype)
    x = prog.batch(0).tokens[:, :, :d]  # (R, B, d, L+1)
    norms = x.double().norm(dim=-2)
    assert torch.allclose(norms[:2], torch.full_like(norms[:2], d**0.5), atol=1e-5)
    assert not torch.allclose(norms[2], torch.full_like(norms[2], d**0.5), atol=1e-2)  # the Gaussian model
    loss_gap, gaps = _grad_gaps(specs, dtype)  # the fused step against autograd on those sequences
    assert loss_gap < TOL[dtype] and max(gaps) < TOL[dtype]
    from icl_lib.sampling import TaskSampler
    from icl_lib.seeding import make_generators as gens

    eager = TaskSampler([s.data for s in specs]).sample(64, [gens(s.seed, "train", "cpu") for s in specs])
    n = eager.tokens[:, :, :d].double().norm(dim=-2)
    assert torch.allclose(n[:2], torch.full_like(n[:2], d**0.5), atol=1e-5)
    with pytest.raises(ValueError, match="covariates"):
        DataConfig(d=d, rho=0.5, covariates="sphere")
