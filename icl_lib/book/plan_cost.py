"""What the book's training plan costs on this device: its runs, the ensembles they train as, and the time expected.

* :func:`describe`   -- runs per chapter (in the run cache, in the run store, or to train), the
  shape-compatible ensembles the engine trains them as, model-steps, and the time expected on
  this device, from the cost model (:func:`estimate_timing`, :data:`REFERENCE_RATES`) or a short
  measurement of every ensemble (:class:`EnsembleTiming`);
* :func:`missing_runs` -- the runs of a plan that :func:`icl_lib.train` would train here.

The plan is :mod:`icl_lib.book.plan`'s.  Command line: ``python -m icl_lib plan``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import torch

from ..config import RunSpec
from ..engine.cache import RunCache
from ..engine.execution import Execution
from ..engine.training import group_chunks, schedule
from ..engine.store import RunStore
from ..engine.trainer import EnsembleTrainer
from .plan import unique_specs

__all__ = ["describe", "missing_runs", "EnsembleTiming", "estimate_timing", "REFERENCE_RATES"]


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
