"""The book's training plan: every run its chapters train, known without executing a notebook.

Each chapter that trains models has a function here that turns its parameters into the list of
:class:`~icl_lib.config.RunSpec` it asks :func:`icl_lib.train` for, built with the same library
functions the chapter calls (:func:`~icl_lib.paper1.sweeps.heads_sweep_specs`,
:func:`~icl_lib.paper1.optimality.experiment.variant_specs`,
:func:`~icl_lib.paper1.optimality.proportional.proportional_specs`,
:func:`~icl_lib.paper1.anisotropic.experiment.rho_specs`, :func:`~icl_lib.paper1.phase.grid_specs`); the
parameters are read from the chapter's ``parameters`` cell, so the plan follows the notebooks.  (A
test executes every chapter with the environment variable ``ICL_RUN_LOG`` set and checks that the
runs it asked for are exactly the plan's.)

* :func:`book_plan`  -- ``{chapter: [RunSpec, ...]}`` for a profile;
* :func:`describe`   -- runs per chapter, the shape-compatible ensembles the engine trains them
  as, model-steps, and the time expected on this device from a short measurement;
* :func:`train_plan` -- trains the whole plan into the run cache as few large ensembles (runs of
  all chapters that share a shape train together), resumable from its checkpoints, with one
  progress bar for the whole plan.

Command line: ``python -m icl_lib plan --profile quick|paper`` and ``python -m icl_lib train-plan``.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

import torch

from ..config import DataConfig, ModelConfig, RunSpec
from ..engine.cache import RunCache
from ..engine.execution import Execution
from ..engine.profiles import resolve_profile, train_config
from ..engine.run import Run
from ..engine.schedule import chunk_cost, group_chunks, schedule, train
from ..engine.store import RunStore, early_twin, experiment_key, holds_all
from ..engine.trainer import EnsembleTrainer
from ..paper1.anisotropic.experiment import rho_specs
from ..paper1.optimality.experiment import variant_specs
from ..paper1.optimality.proportional import proportional_specs
from ..paper1.phase import PhaseGrid, grid_specs, profile_lrs
from ..paper1.sweeps import as_heads, heads_sweep_specs
from ..paper1.trap import horizon_config, trap_specs, trap_sweep
from ..validate import check_choice, check_int, literal_list
from .records import served

__all__ = ["BOOK", "CHAPTER_PLANS", "chapter_parameters", "book_plan", "select_chapters", "unique_specs", "describe", "train_plan",
           "store_plan", "store_summary", "published_profiles", "missing_runs", "CPU_PAPER_CHAPTERS", "EARLY_STEP", "EnsembleTiming",
           "estimate_timing", "REFERENCE_RATES"]

BOOK = Path(__file__).resolve().parents[2] / "book"  # the chapters of a source checkout
EARLY_STEP = 2000  # the stored early checkpoint of a paper-profile run (its integrity test retrains to it)


def chapter_parameters(path: str | Path) -> dict:
    """Name -> value of a chapter's ``parameters`` cell (plain literals, one per line)."""
    nb = json.loads(Path(path).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    params = {}
    for node in ast.parse("".join(cell["source"])).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{path}: the parameters cell holds {ast.unparse(node)!r}: accepted `name = literal`")
        params[node.targets[0].id] = ast.literal_eval(node.value)
    return params


def _train_cfg(p: dict, profile: str):
    return train_config(profile, steps=p.get("steps"), lr=p.get("lr"))


def _setup(p: dict, profile: str) -> list[RunSpec]:  # chapter 1: one model
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"])
    return [RunSpec(data=data, model=ModelConfig(heads=p["heads"]), train=_train_cfg(p, profile), seed=p["seed"])]


def _sweep(p: dict, profile: str, heads=None, data=None) -> list[RunSpec]:  # chapter 2's H = 1..4 sweep
    heads = as_heads(literal_list("heads", p["heads"]) if heads is None else heads)
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"]) if data is None else data
    return heads_sweep_specs(heads, p["seeds"], p["seed"], data, _train_cfg(p, profile))


def _dynamics(p: dict, profile: str) -> list[RunSpec]:  # chapter 3: the sweep's H and gd_heads
    heads = sorted(set(as_heads(literal_list("heads", p["heads"]))) | {p["gd_heads"]})
    return _sweep(p, profile, heads=heads)


def _optimality(p: dict, profile: str) -> list[RunSpec]:  # chapter 5: the sweep, 2-head variants, xi = d / L
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"])
    cfg = _train_cfg(p, profile)
    return (_sweep(p, profile) + variant_specs(p["variant_seeds"], p["seed"], data, cfg)
            + proportional_specs(p["prop_d"], literal_list("prop_xis", p["prop_xis"]), p["prop_seeds"], p["seed"],
                                 p["sigma2"], cfg))


def _anisotropic(p: dict, profile: str) -> list[RunSpec]:  # chapter 6: two heads per rho and seed
    rhos = sorted({*literal_list("rhos", p["rhos"]), p["rho"]})
    return rho_specs(rhos, p["seeds"], p["seed"], p["d"], p["L"], p["sigma2"], _train_cfg(p, profile))


def _multitask(p: dict, profile: str) -> list[RunSpec]:  # chapter 7: the sweep on several tasks
    data = DataConfig(d=p["d"], L=p["L"], sigma2=p["sigma2"], supports=literal_list("supports", p["supports"]))
    return _sweep(p, profile, data=data)


def _beyond(p: dict, profile: str) -> list[RunSpec]:  # chapter 9: the trap sweep, then the grid's slice
    sweep = trap_sweep(profile, heads=p["trap_heads"], init_scales=p["init_scales"], lrs=p["lrs"],
                       seeds=p["seeds"], anchor_seeds=p["anchor_seeds"])
    grid = PhaseGrid(p["grid_heads"], p["grid_shapes"], p["grid_sigma2s"], profile_lrs(profile, p["grid_lrs"]),
                     p["grid_init_scales"])
    plan = grid.plan(profile, p["grid_seeds"], p["grid_slice_seeds"])
    return (trap_specs(sweep, profile, p["seed"], p["steps"])
            + grid_specs(plan, p["seed"], horizon_config(profile, p["steps"])))


# chapter -> its runs from its parameters (chapters absent here train nothing)
CHAPTER_PLANS: dict[str, Callable[[dict, str], list[RunSpec]]] = {
    "01_setup": _setup,
    "02_patterns": _sweep,
    "03_two_stage_dynamics": _dynamics,
    "05_optimality": _optimality,
    "06_anisotropic": _anisotropic,
    "07_multitask": _multitask,
    "09_phase_diagram": _beyond,
}


def book_plan(profile: str = "quick", book: str | Path = BOOK, overrides: dict | None = None) -> dict[str, list[RunSpec]]:
    """``{chapter: runs}`` of every chapter of ``book`` that trains, with the chapters' default
    parameters (``overrides``: ``{chapter: {name: value}}`` on top of them) in ``profile``."""
    profile = resolve_profile(check_choice("profile", profile, ("auto", "quick", "paper")))
    plan = {}
    for name, runs_of in CHAPTER_PLANS.items():
        path = Path(book) / f"{name}.ipynb"
        if path.exists():
            params = {**chapter_parameters(path), **(overrides or {}).get(name, {})}
            plan[name] = runs_of(params, profile)
    return plan


def select_chapters(plan: dict[str, list[RunSpec]], chapters: str | None) -> dict[str, list[RunSpec]]:
    """The chapters of ``plan`` named in ``chapters`` (comma-separated names or their number
    prefixes, e.g. ``"02,05"``; ``None``: all): the command line's ``--chapters``."""
    if chapters is None:
        return plan
    out = {}
    for token in (t.strip() for t in str(chapters).split(",")):
        hits = [c for c in plan if token and (c == token or c.split("_")[0] == token)]
        if len(hits) != 1:
            raise ValueError(f"chapters={chapters!r} is invalid: accepted comma-separated chapters of the plan "
                             f"or their numbers ({', '.join(plan)}); {token!r} matches {len(hits)}")
        out[hits[0]] = plan[hits[0]]
    return out


def unique_specs(plan: dict[str, list[RunSpec]]) -> list[RunSpec]:
    """Every run of the plan once (chapters share runs: chapter 3 and 5 reuse chapter 2's)."""
    return list(dict.fromkeys(s for specs in plan.values() for s in specs))


class EnsembleTiming(NamedTuple):
    """What one ensemble of the plan costs on this device: a training step in the steady state
    (``step_seconds``, no history recorded) and one history record (``record_seconds``: every
    head's circuits and the loss on the validation set, at each of ``TrainConfig.log_steps()``)."""

    models: int
    step_seconds: float
    record_seconds: float

    @property
    def model_steps_per_s(self) -> float:
        return self.models / max(self.step_seconds, 1e-12)

    def seconds(self, steps: int, records: int) -> float:
        """The time of ``steps`` training steps with ``records`` history records."""
        return steps * self.step_seconds + records * self.record_seconds


def _measure(specs: list[RunSpec], execution: Execution, steps: int = 6) -> EnsembleTiming:
    """Time one ensemble of ``specs`` (at most 64 of them) on this device: ``steps`` training steps
    after 3 warm-up steps, none of them recorded, and one history record.

    The two are timed apart because the history is log-spaced: the first dozens of steps are all
    recorded, so timing them would count a validation pass per step (in the paper profile, 8,192
    sequences per model) and project the plan many times longer than it trains."""
    specs = specs[:64]
    quiet = [dataclasses.replace(s, train=dataclasses.replace(s.train, n_log=2)) for s in specs]  # records 0, 1, end
    trainer = EnsembleTrainer(quiet, progress=False, execution=execution)
    sync = torch.cuda.synchronize if execution.device.type == "cuda" else (lambda: None)
    trainer.run(until=3)
    sync()
    t0 = time.perf_counter()
    trainer.run(until=3 + steps)
    sync()
    t1 = time.perf_counter()
    trainer.snapshot()
    sync()
    t2 = time.perf_counter()
    return EnsembleTiming(len(specs), max(t1 - t0, 1e-9) / steps, t2 - t1)


# The cost model of :func:`describe` without ``measure``: model-steps per second of one thread at
# the reference shape (d = 5, L = 40, one task, two heads, batch 256), by backend, measured by
# `make bench` on this project's build machine (an Intel Xeon core with AVX-512: the fused step
# 3,000-3,700 on one core, the eager engine 1,133 for 32 models on two); on a GPU the engine's rate
# on one H200 (256 models).  A run's cost scales with (L + 1) (d + N) H batch, its history records
# with their validation prompts (a forward pass: a third of a step per prompt).
REFERENCE_RATES = {"fused": 3_000.0, "eager": 560.0, "cuda": 118_923.0}
REFERENCE_WORK = 41 * 6 * 2 * 256


def _work(spec: RunSpec) -> int:
    d = spec.data
    return (d.L + 1) * (d.d + d.n_tasks) * spec.model.heads * spec.train.batch


def estimate_timing(specs: list[RunSpec], execution: Execution, threads: int | None = None) -> EnsembleTiming:
    """The cost model's :class:`EnsembleTiming` of one ensemble (no training): the reference rate
    of the device and backend (:data:`REFERENCE_RATES`, per thread on a CPU, times ``threads``,
    default torch's) scaled by each run's work per step against the reference shape's."""
    if execution.device.type == "cuda":
        rate = REFERENCE_RATES["cuda"]
    else:
        rate = REFERENCE_RATES[execution.backend] * (threads or torch.get_num_threads())
    work = sum(_work(s) for s in specs) / max(len(specs), 1)
    step = len(specs) * work / (rate * REFERENCE_WORK)
    record = step * specs[0].train.val_size / specs[0].train.batch / 3 if specs else 0.0
    return EnsembleTiming(len(specs), step, record)


def _availability(plan: dict[str, list[RunSpec]], ex: Execution, cache: RunCache) -> tuple[dict, set, set, dict]:
    """The distinct runs of ``plan`` by their run-cache key on this execution, the keys found in
    the run cache, those found (only) in the run store, and the runs in neither (to train)."""
    todo = {ex.run_key(s): s for s in unique_specs(plan)}
    cached = {k for k in todo if cache.path(k).exists()}
    store = RunStore()
    stored = {k for k, s in todo.items() if k not in cached and store.entry(s) is not None}
    missing = {k: s for k, s in todo.items() if k not in cached and k not in stored}
    return todo, cached, stored, missing


def missing_runs(plan: dict[str, list[RunSpec]], device: str = "auto", backend: str = "auto") -> list[RunSpec]:
    """The distinct runs of ``plan`` that :func:`icl_lib.train` would train on ``device``: those
    neither in the run cache (for this device and backend) nor in the run store."""
    return list(_availability(plan, Execution.resolve(device, backend=backend), RunCache())[3].values())


def describe(plan: dict[str, list[RunSpec]], device: str = "auto", measure: bool = False, max_ensemble: int = 64,
             backend: str = "auto") -> str:
    """The plan in words: runs per chapter (in the run cache, in the run store, or to train), the
    ensembles the engine trains (shape, models, steps, model-steps, rate and time with ``backend``)
    and the totals.  The rates come from the cost model (:func:`estimate_timing`, instant) or,
    with ``measure``, from timing a few steps of every ensemble here (seconds each)."""
    ex = Execution.resolve(device, backend=backend)
    cache = RunCache()
    lines = []
    for chapter, specs in plan.items():
        lines.append(f"  {chapter:24s} {len(specs):4d} runs")
    todo, cached, stored, missing = _availability(plan, ex, cache)
    chunks = group_chunks(missing, max_ensemble)
    solo, together = schedule(chunks, missing, ex.device)
    total_ms, seconds_solo, seconds_together = 0, 0.0, 0.0
    rows = []
    for chunk in solo + together:
        specs = [missing[k] for k in chunk]
        s0 = specs[0]
        ms = len(specs) * s0.train.steps
        total_ms += ms
        timing = _measure(specs, ex) if measure else estimate_timing(specs, ex)
        records = len(s0.train.log_steps())
        seconds = timing.seconds(s0.train.steps, records)
        if chunk in solo:
            seconds_solo += seconds
        else:
            seconds_together += seconds
        cost = (f", {timing.model_steps_per_s:,.0f} model-steps/s + {records} history records of "
                f"{timing.record_seconds:.2g} s, {seconds / 60:.1f} min")
        shape = f"d={s0.data.d} L={s0.data.L} tasks={s0.data.n_tasks} {s0.model.attention}"
        rows.append(f"  {shape:38s} {len(specs):3d} models x {s0.train.steps:,} steps = {ms:,} model-steps"
                    + cost + ("" if chunk in solo else " (side by side)"))
    # an ensemble trained side by side runs single-threaded, T of them at once on T threads: about
    # the time of training them one after another on all threads (the rate measured here)
    estimate = seconds_solo + seconds_together
    head = [f"plan on {ex.device.type} ({ex.backend} backend): {sum(len(v) for v in plan.values())} runs requested by {len(plan)} chapters, "
            f"{len(todo)} distinct, {len(cached)} already in the run cache ({cache.root}), "
            f"{len(stored)} in the run store"]
    tail = [f"to train: {len(missing)} runs as {len(chunks)} ensembles, {total_ms:,} model-steps"]
    if chunks:
        how = ("rates measured alone with all threads" if measure else
               "rates from the cost model, calibrated on the build machine's benchmark; --measure times them here")
        tail.append(f"expected time on this device: about {estimate / 60:.1f} min ({how}; ensembles marked side "
                    "by side share the cores, one thread each)")
    return "\n".join(head + lines + ["ensembles:"] + (rows or ["  (none: every run is cached)"]) + tail)


class _PlanBar:
    """One tqdm bar over every model-step of a plan, updated from the training threads."""

    def __init__(self, total: int, enabled: bool):
        self.lock = threading.Lock()
        self.bar = None
        if enabled and total:
            from tqdm.auto import tqdm  # only when a bar is shown

            self.bar = tqdm(total=total, unit="model-step", unit_scale=True, desc="train-plan", smoothing=0.05)

    def __call__(self, models: int) -> None:
        if self.bar is not None:
            with self.lock:
                self.bar.update(models)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def train_plan(plan: dict[str, list[RunSpec]], device: str = "auto", progress: bool = True,
               checkpoint_every: float = 60.0, max_ensemble: int = 64, executor: str = "local",
               scheduler: str | None = None, workers: int = 2, backend: str = "auto") -> dict[str, list[Run]]:
    """Train every run of ``plan`` missing from the run cache as the largest shape-compatible
    ensembles (runs of all chapters pack together), side by side where that keeps the cores busy;
    an interrupted or killed plan resumes from its checkpoints (every ``checkpoint_every``
    seconds) to the numbers of an uninterrupted one.  ``executor="dask"`` sends each ensemble to a
    Dask cluster instead (:func:`icl_lib.engine.executors.train_on_dask`: ``scheduler`` an address,
    or ``None`` for a local cluster of ``workers`` processes).  ``backend``: how a CPU computes a
    step (:func:`~icl_lib.engine.execution.resolve_backend`).  Returns ``{chapter: runs}``."""
    check_choice("executor", executor, ("local", "dask"))
    ex = Execution.resolve(device, backend=backend)
    specs = unique_specs(plan)
    cache = RunCache()
    left = sum(s.train.steps for s in specs if not cache.path(ex.run_key(s)).exists())
    bar = _PlanBar(left, progress)
    try:
        if executor == "dask":
            from ..engine.executors import train_on_dask  # Dask is optional: imported only for it

            runs = train_on_dask(specs, scheduler=scheduler, workers=workers, device=device,
                                 max_ensemble=max_ensemble, progress=bar if bar.bar is not None else None)
        else:
            runs = train(specs, device=device, progress=bar if bar.bar is not None else False,
                         max_ensemble=max_ensemble, checkpoint_every=checkpoint_every, backend=backend)
    finally:
        bar.close()
    by_spec = dict(zip(specs, runs))
    return {chapter: [by_spec[s] for s in chapter_specs] for chapter, chapter_specs in plan.items()}


def store_plan(plan: dict[str, list[RunSpec]], early_step: int = EARLY_STEP, device: str = "auto",
               store: RunStore | None = None, command: str = "", progress: bool = True,
               max_ensemble: int = 64, checkpoint_every: float = 60.0, processes: int = 1,
               backend: str = "auto") -> dict:
    """Train (or take from the run cache) every run of ``plan`` missing from the run store, with
    its early twin (the same spec stopped at ``early_step``, so its parameters are the run's own
    at that step), and write them to the store with their provenance (``make paper-runs``).

    The runs train as shape-compatible ensembles of at most ``max_ensemble`` models (on a CPU, as
    many side by side as it has threads, one per thread, each thread taking the next ensemble
    when its own ends), and each ensemble is written to the store as soon as it ends: an export
    stopped at any point keeps what it finished.  The ensembles in training checkpoint every
    ``checkpoint_every`` seconds into the store's ``ckpt/`` folder (:attr:`RunStore.checkpoint_dir`),
    so the checkpoints can be committed with the store and a later export on the same kind of
    device resumes them (a CPU's data streams are not a GPU's: each device kind has its own
    checkpoints).  ``processes > 1`` on a CPU trains the ensembles in that many worker processes
    instead, one single-threaded ensemble each, each taking the next ensemble (largest first)
    when its own is stored (:func:`_export_in_processes`): the same ensembles, checkpoints and
    numbers, without the threads of one process contending for its interpreter.  ``backend``: how
    a CPU computes a step (a run's provenance names it).  Returns :meth:`RunStore.status` of the plan."""
    store = store or RunStore()
    max_ensemble = check_int("max_ensemble", max_ensemble, 1)
    processes = check_int("processes", processes, 1, 256)
    specs = unique_specs(plan)
    todo = [s for s in specs if store.entry(s) is None]
    if processes > 1 and todo:
        ex = Execution.resolve(device, backend=backend)
        if ex.device.type == "cpu":
            keyed = {ex.run_key(s): s for s in todo}
            chunks = sorted(group_chunks(keyed, max_ensemble), key=lambda c: chunk_cost(c, keyed), reverse=True)
            if len(chunks) > 1:
                _export_in_processes([[keyed[k] for k in c] for c in chunks], min(processes, len(chunks)), store,
                                     dict(early_step=early_step, device=device, command=command, progress=progress,
                                          max_ensemble=max_ensemble, checkpoint_every=checkpoint_every,
                                          backend=backend))
                store.write_manifest()  # once more, after every worker's last write
                return store.status(specs)
    lock = threading.Lock()

    def save(runs: list[Run]) -> None:
        runs = [r for r in runs if not r.meta.get("stored")]
        twins = train([early_twin(r.spec, min(early_step, r.spec.train.steps)) for r in runs], device,
                      progress=progress, max_ensemble=max_ensemble, use_store=False, backend=backend)
        with lock:  # one writer of the manifest at a time
            for run, twin in zip(runs, twins):
                store.save(run, twin, command)

    runs = train(todo, device, progress=progress, max_ensemble=max_ensemble, checkpoint_every=checkpoint_every,
                 checkpoint_dir=store.checkpoint_dir, on_trained=save, backend=backend)
    save([r for r in runs if store.entry(r.spec) is None])  # runs the run cache already held
    return store.status(specs)


def _export_in_processes(chunks: list[list[RunSpec]], processes: int, store: RunStore, kwargs: dict) -> None:
    """Store ``chunks`` (ensembles, largest first) with :func:`store_plan` in ``processes`` spawned
    worker processes of one thread each, each taking the next ensemble when its own is stored.

    The workers run in their own process group, so an interrupt reaches them once, from here: a
    ``KeyboardInterrupt`` (Ctrl-C, or SIGINT sent to this process alone) is passed on to every
    worker, which checkpoints its ensemble into the store's ``ckpt/`` and stops; then it
    propagates.  A worker that fails raises a ``RuntimeError`` here once the others have ended."""
    import multiprocessing as mp
    import signal

    ctx = mp.get_context("spawn")  # a fresh interpreter: nothing of this one is inherited
    taken = ctx.Value("i", 0)  # the index of the next ensemble to take
    workers = [ctx.Process(target=_export_worker, args=(chunks, taken, str(store.root), kwargs))
               for _ in range(processes)]
    for w in workers:
        w.start()
    try:
        for w in workers:
            w.join()
    except KeyboardInterrupt:
        for w in workers:
            if w.is_alive():
                try:
                    os.kill(w.pid, signal.SIGINT)
                except ProcessLookupError:  # it ended in the meantime
                    pass
        for w in workers:
            w.join()
        raise
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"store export: {len(failed)} of {processes} worker processes failed (exit codes {failed}); "
                           "their errors are printed above, and the ensembles they finished are in the store")


def _export_worker(chunks: list[list[RunSpec]], taken, root: str, kwargs: dict) -> None:
    """One worker process of :func:`_export_in_processes`: store the next ensemble until none is left."""
    import signal
    import sys

    if hasattr(os, "setpgrp"):
        os.setpgrp()  # interrupts come from the parent, once
    # and are honoured even where the export was started with SIGINT ignored (a background job
    # of a non-interactive shell), which a spawned interpreter would inherit
    signal.signal(signal.SIGINT, signal.default_int_handler)
    torch.set_num_threads(1)
    store = RunStore(root)
    try:
        while True:
            with taken.get_lock():
                i = taken.value
                taken.value += 1
            if i >= len(chunks):
                return
            store_plan({"ensemble": chunks[i]}, store=store, processes=1, **kwargs)
    except KeyboardInterrupt:
        sys.exit(130)  # the ensemble in training has written its checkpoint


def store_summary(plan: dict[str, list[RunSpec]], store: RunStore | None = None) -> dict[str, str]:
    """Per chapter, what the run store holds of its runs in this plan: ``"24 of 24 runs stored,
    trained on cuda (NVIDIA H200), 2026-12-01"``, ``"0 of 24 runs stored"`` or ``"trains nothing"``,
    followed by ``"; 16 in training (23-31% of their steps)"`` when ``store export`` left some of
    them in its committed checkpoints (:meth:`RunStore.checkpoints`)."""
    store = store or RunStore()
    training = {key: c["step"] / c["steps"] for c in store.checkpoints() if c.get("current") for key in c["keys"]}
    out = {}
    for chapter, specs in plan.items():
        entries = [e for e in (store.entry(s) for s in specs) if e is not None]
        text = f"{len(entries)} of {len(specs)} runs stored"
        if entries:
            devices = sorted({e.provenance["device"] for e in entries})
            dates = sorted(e.provenance["date"][:10] for e in entries)
            text += f", trained on {', '.join(devices)}, {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
        done = [training[k] for k in {experiment_key(s) for s in specs} if k in training]
        if done:
            lo, hi = f"{100 * min(done):.0f}", f"{100 * max(done):.0f}"
            text += f"; {len(done)} in training ({lo if lo == hi else f'{lo}-{hi}'}% of their steps)"
        out[chapter] = text
    return out


# Chapters that train no model and whose paper profile a CPU build computes itself: chapter 4's
# ODEs take about 10 s in it on the build machine.  Chapter 8's paper sizes (longer sequences, more
# repetitions and iterations) had not finished after 28 minutes there (one core; stopped in its
# six-method comparison, cell 26 of 80), beyond the ~15 minutes a CPU build of the paper profile
# may take, so the published book shows its quick profile.
CPU_PAPER_CHAPTERS = ("04_ode_phases",)


def published_profiles(chapters, book: str | Path = BOOK, store: RunStore | None = None) -> dict[str, str]:
    """The profile in which each of ``chapters`` (notebook names, e.g. ``"02_patterns"``) is built
    for the published book (``ICL_BOOK_PROFILE=stored make book``, as CI builds it), so that the
    CPU build trains nothing: ``paper`` for a chapter that trains when the run store holds every
    run of its paper plan, for the chapters of :data:`CPU_PAPER_CHAPTERS`, and for a chapter with a
    current committed record of its paper run (:func:`icl_lib.tools.records.served`: chapter 8);
    ``quick`` otherwise.

    So the papers' chapters show the papers' training as soon as their runs are stored, whatever
    the store holds of chapter 9's much larger grid."""
    store = store or RunStore()
    plan = book_plan("paper", book)
    current, _ = store.scan()  # read every entry once, whatever the number of chapters
    out = {}
    for name in chapters:
        if name in plan:
            out[name] = "paper" if holds_all({experiment_key(s) for s in plan[name]}, current) else "quick"
        else:
            recorded = served(Path(book) / f"{name}.ipynb", "paper") is not None
            out[name] = "paper" if name in CPU_PAPER_CHAPTERS or recorded else "quick"
    return out
