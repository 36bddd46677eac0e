"""The ensemble trainer: R attention models side by side on fresh batches (paper 1, Section 2).

:class:`EnsembleTrainer` trains one ensemble of shape-compatible runs (same ``d``, ``L``, tasks,
attention kind and :class:`~icl_lib.config.TrainConfig`; seeds, head counts, noise levels and
covariances may differ).  Each model draws its initialisation and its data from its own
generators, and Adam/SGD act element-wise, so a model trained in an ensemble ends where it would
alone (up to floating-point summation order; tested).  Its loop is

    batch = source.next(t)      # icl_lib.engine.sources: plain, prefetch, draw-ahead or shards
    loss = step(batch, t)       # icl_lib.engine.steps: eager, sharded or CUDA graph

with the source and the step chosen once from the :class:`~icl_lib.engine.execution.Execution`.

The history records, at the steps of ``TrainConfig.log_steps()``, the training-batch loss, the loss
on a fixed held-out validation set, and every head's ``KQ`` and ``OV`` circuits (chapter 3's
dynamics), all taken before that step's update.  Long runs checkpoint atomically (temporary file,
then rename: :mod:`icl_lib.engine.atomic`) and resume to the same parameters as an uninterrupted
run, also after Ctrl-C (which ends the current step first).  A periodic checkpoint that cannot be
written (a full disk) costs one warning line, not the run: training goes on, and tries again at
the next one.  A diverging run (a non-finite loss, or a loss far above that of
predicting 0: :class:`~icl_lib.engine.steps.DivergenceWatch`) stops with an error naming the
step and the learning rate.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Sequence

import torch

from ..config import RunSpec, resolve_dtype
from ..sampling import Batch, TaskSampler
from ..seeding import content_seed, generator, make_generators
from ..validate import check_int
from ..version import MODEL_CODE_VERSION
from .atomic import WriteFailed, remove_stale_temporaries, write_atomic
from .execution import Execution, tune_cpu_allocator
from .forms import FormOptimizer
from .run import Run, empty_model
from .sources import AheadSource, PlainSource, PrefetchSource, ShardSource, set_generator_states
from .steps import DivergenceWatch, EagerStep, GraphStep, ShardedStep, TrainingDiverged, make_loss_fn, make_shards

__all__ = ["EnsembleTrainer", "TrainingDiverged", "validation_batch"]

log = logging.getLogger(__name__)


def validation_batch(spec: RunSpec, device="cpu", dtype=torch.float32) -> Batch:
    """The fixed held-out validation set of a run: it depends only on the task (``spec.data``) and
    ``val_size``, and is drawn on the CPU and moved to ``device``, so all runs of one task are
    compared on the same sequences whatever device trains them.  (Runs trained on a GPU before
    this drew it on the GPU: their stored validation losses are on another set, and the chapters
    compare runs on test sets of their own, drawn on the CPU.)"""
    seed = content_seed({"data": spec.to_dict()["data"], "n": spec.train.val_size})
    gen = generator(seed, "val", device="cpu")
    sampler = TaskSampler([spec.data], device="cpu", dtype=dtype)
    return sampler.sample(spec.train.val_size, [[gen]]).member(0).to(device)


def _stack_batches(batches: Sequence[Batch]) -> Batch:
    return Batch(torch.stack([b.tokens for b in batches]), torch.stack([b.beta for b in batches]))


class EnsembleTrainer:
    """Train R shape-compatible runs as one batched program (paper 1's setup; chapters 1-7).

    ``execution``: where and how (:class:`~icl_lib.engine.execution.Execution`); when it is not
    given, it is resolved from ``device`` (then named: ``"cpu"``, ``"cuda"`` or ``"auto"``),
    ``draw_ahead``, ``graph`` and ``compile``.
    ``checkpoint``: a file written atomically every ``checkpoint_every`` seconds, on Ctrl-C and
    when stopped early, and resumed from when it exists.  ``shards``: CPU threads each training a
    slice of the ensemble (default: one per thread).  ``progress``: ``True`` shows this ensemble's
    bar; a callable instead is called with the number of models after every step (a progress
    bar over many ensembles: :func:`icl_lib.book.plan_training.train_plan`).
    """

    def __init__(
        self,
        specs: Sequence[RunSpec],
        device: str | None = None,
        checkpoint: str | os.PathLike | None = None,
        checkpoint_every: float = 60.0,
        progress=True,
        compile: bool | str = "auto",
        shards: int | None = None,
        draw_ahead: int | str = "auto",
        graph: bool = False,
        execution: Execution | None = None,
        backend: str = "auto",
    ):
        specs = list(specs)
        if not specs:
            raise ValueError("specs=[] is invalid: accepted at least one RunSpec")
        g0 = specs[0].group_key()
        for k, s in enumerate(specs):
            if s.group_key() != g0:
                raise ValueError(
                    f"specs[{k}] cannot share an ensemble with specs[0]: accepted equal d, L, number of tasks, "
                    "attention kind and TrainConfig (use icl_lib.train, which groups runs)"
                )
        self.specs = specs
        ex = Execution.given(device, execution, draw_ahead=draw_ahead, graph=graph, compile=compile, backend=backend)
        self.execution, self.device, self.draw = ex, ex.device, ex.draw_ahead
        if self.draw > 1 and shards not in (None, 1):
            raise ValueError(f"shards={shards} is invalid with draw_ahead={self.draw}: accepted 1 (draw-ahead is for one program)")
        if self.device.type == "cpu":
            tune_cpu_allocator()
        tc = self.tc = specs[0].train
        self.dtype = resolve_dtype(tc.dtype)
        self.model = empty_model(specs, self.device, self.dtype)
        init_gens = [make_generators(s.seed, "init", "cpu", streams=1)[0] for s in specs]
        self.model.reset_parameters(init_gens, [s.model.init_scale for s in specs], [s.model.init for s in specs])
        self.sampler = TaskSampler([s.data for s in specs], device=self.device, dtype=self.dtype)
        self.generators = [make_generators(s.stream_seed, "train", self.device) for s in specs]
        self.opt = self._optimizer()
        if all((s.data, s.train.val_size) == (specs[0].data, tc.val_size) for s in specs):
            self.val = validation_batch(specs[0], self.device, self.dtype)  # (V, ...) shared by all models
        else:
            self.val = _stack_batches([validation_batch(s, self.device, self.dtype) for s in specs])  # (R, V, ...)
        zero_loss = (self.val.yq**2).mean(dim=(-2, -1)).expand(len(specs)).clone()  # (R,) of predicting 0
        self.step = 0
        self.elapsed = 0.0
        self.watch = DivergenceWatch(specs, zero_loss)
        self.history: dict[str, list] = {"step": [], "train_loss": [], "val_loss": [], "KQ": [], "OV": []}
        self.log_steps = tc.log_steps()
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.checkpoint_every = checkpoint_every
        # ICL_PROGRESS=0 turns the bar off: the book build sets it (icl_lib/book/sphinx), since a
        # static page has no use for it and in a notebook it is one more output of a figure cell.
        self.report = progress if callable(progress) else None  # called with R after every step
        self.progress = progress is True and os.environ.get("ICL_PROGRESS", "1") != "0"
        self.source, self.stepper = self._source_and_step(shards)
        self.checkpoint_failed = False  # a periodic checkpoint could not be written (said once)
        if self.checkpoint is not None:  # what a writer of it killed mid-write left
            remove_stale_temporaries(self.checkpoint.parent, self.checkpoint.name)
        if self.checkpoint is not None and self.checkpoint.exists():
            self.load_state_dict(torch.load(self.checkpoint, map_location=self.device, weights_only=True))

    def _optimizer(self) -> torch.optim.Optimizer:
        if self.specs[0].model.form != "full":  # paper 1's form (3.1): the heads' scales only
            if self.execution.graph:
                raise ValueError("form='3.1' is invalid with CUDA graphs: accepted form='full', or no graphs")
            return FormOptimizer(self.model, self.tc.optimizer, self.tc.lr)
        params = [self.model.Q, self.model.K, self.model.V, self.model.O]
        if self.tc.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.tc.lr)
        kw = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        if self.device.type == "cuda":  # step count on the GPU: the same kernel eager and in a CUDA graph
            kw["capturable"] = True
        return torch.optim.Adam(params, lr=self.tc.lr, **kw)

    def _source_and_step(self, shards: int | None):
        """The batch source and the step for this execution (module docstrings of both)."""
        R, B = len(self.specs), self.tc.batch
        if self.execution.backend == "fused":
            from .fused import FusedProgram, FusedSource, FusedStep  # compiles its kernels on first use

            threads = shards if shards is not None else torch.get_num_threads()
            program = FusedProgram(self.model, self.specs, threads=threads, sampler=self.sampler)
            return FusedSource(self.sampler, self.generators, B), FusedStep(program, self.opt, self.watch)
        buffer = torch.empty(R, B, self.sampler.numbers_per_sequence(), device=self.device, dtype=self.dtype)
        parts = make_shards(self.model, self.specs, self.generators, buffer, 1 if self.draw > 1 else shards)
        if parts:
            source = ShardSource(self.sampler, self.generators, B, parts)
            return source, ShardedStep(self.model, self.opt, parts, self.watch)
        if self.draw > 1:
            source = AheadSource(self.sampler, self.generators, B, buffer, self.draw)
        elif self.device.type == "cpu" and R == 1 and torch.get_num_threads() > 1:
            source = PrefetchSource(self.sampler, self.generators, B, buffer)  # a lone model, spare cores
        else:
            source = PlainSource(self.sampler, self.generators, B, buffer)
        if self.execution.graph:
            return source, GraphStep(self.model, self.opt, source.static, self.watch, self.device)
        return source, EagerStep(self.opt, make_loss_fn(self.model, self.execution.compile), self.watch)

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {
            "code": MODEL_CODE_VERSION,
            "specs": [json.dumps(s.to_dict(), sort_keys=True) for s in self.specs],
            "step": self.step,
            "elapsed": self.elapsed,
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "opt": self.opt.state_dict(),
            "generators": self.source.checkpoint_states(self.step),
            "first_bad": self.watch.first_bad.clone(),
            "bad_loss": self.watch.bad_loss.clone(),
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        mine = [json.dumps(s.to_dict(), sort_keys=True) for s in self.specs]
        if state["specs"] != mine:
            raise ValueError("checkpoint does not match these runs: accepted a checkpoint of the same RunSpecs")
        if state.get("code") != MODEL_CODE_VERSION:
            raise ValueError(
                f"checkpoint code={state.get('code')!r} is invalid: accepted a checkpoint written by model-code "
                f"version {MODEL_CODE_VERSION!r} (delete it to train from the start)"
            )
        self.source.reset()
        self.stepper.reset()
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        set_generator_states(self.generators, state["generators"])
        self.step = int(state["step"])
        self.elapsed = float(state["elapsed"])
        self.watch.first_bad.copy_(state["first_bad"])
        self.watch.bad_loss.copy_(state["bad_loss"])
        # the history is kept on the CPU (as recorded), while map_location may have moved it to the GPU
        self.history = {k: [x.cpu() if torch.is_tensor(x) else x for x in v] for k, v in state["history"].items()}

    def save_checkpoint(self) -> None:
        """Write the checkpoint atomically: a temporary file in the same folder, then a rename; a
        write that fails leaves no temporary file and raises :class:`~icl_lib.engine.atomic.WriteFailed`."""
        if self.checkpoint is None:
            return
        buf = io.BytesIO()
        torch.save(self.state_dict(), buf)
        try:
            self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise WriteFailed("checkpoint", self.checkpoint, buf.tell(), err) from err
        write_atomic(self.checkpoint, buf.getvalue(), "checkpoint")

    def _checkpoint_or_warn(self, then: str) -> None:
        """Save the checkpoint; if it cannot be written, say so in one warning line (once per
        trainer) and go on (``then``: what happens next, for that line)."""
        try:
            self.save_checkpoint()
        except WriteFailed as err:
            if not self.checkpoint_failed:
                log.warning("icl_lib trainer: %s at step %d; %s", err, self.step, then)
            self.checkpoint_failed = True

    # ----------------------------------------------------------------- history
    @torch.no_grad()
    def snapshot(self) -> tuple:
        """What the history records of the current parameters: circuits and validation loss (at
        each of ``TrainConfig.log_steps()``; the training plan times it, :func:`icl_lib.book.plan_cost.describe`)."""
        KQ, OV = self.model.circuits()
        return KQ.float().cpu(), OV.float().cpu(), self.model.loss(self.val).float().cpu()

    def _record(self, step: int, train_loss: torch.Tensor, snapshot: tuple | None = None) -> None:
        """Append step ``step`` to the history (``snapshot``: taken at that step's parameters)."""
        KQ, OV, val_loss = self.snapshot() if snapshot is None else snapshot
        self.history["step"].append(step)
        self.history["train_loss"].append(train_loss.detach().float().cpu())
        self.history["val_loss"].append(val_loss)
        self.history["KQ"].append(KQ)
        self.history["OV"].append(OV)
        self.watch.check()

    # ----------------------------------------------------------------- loop
    def run(self, until: int | None = None, stop=None) -> list[Run] | None:
        """Train up to step ``until`` (default: the configured ``steps``).

        Returns the finished runs when training is complete, ``None`` when stopped early at
        ``until`` (the checkpoint, if any, then holds the state).  A ``KeyboardInterrupt``
        writes the checkpoint before it propagates; so does setting ``stop`` (a
        ``threading.Event``, set by :func:`icl_lib.train` to stop the other threads' runs).  In the
        main thread a first Ctrl-C (SIGINT) lets the current step finish, so that the checkpoint
        resumes to the numbers of an uninterrupted run; a second one interrupts at once.
        """
        steps = self.tc.steps
        until = steps if until is None else check_int("until", until, 0, steps)
        log_set = set(self.log_steps)
        recorded = set(self.history["step"])
        active = until > self.step
        bar = None
        if self.progress and active:
            from tqdm.auto import tqdm  # only when a bar is shown: it pulls in notebook support

            bar = tqdm(total=steps, initial=self.step, desc=f"train R={len(self.specs)}", leave=False, mininterval=0.5)
        t0 = time.perf_counter()
        last_ckpt = t0
        threads = torch.get_num_threads()
        single = active and (self.source.single_threaded or self.stepper.single_threaded)
        if active:
            self.source.begin(until)
            self.stepper.begin(until)
        if single:
            torch.set_num_threads(1)
        interrupted = _StepBoundarySigint()
        try:
            while self.step < until:
                if (stop is not None and stop.is_set()) or interrupted:
                    raise KeyboardInterrupt
                t = self.step
                snapshot = self.snapshot() if t in log_set and t not in recorded else None
                batch = self.source.next(t)
                loss = self.stepper(batch, t)
                if snapshot is not None:
                    self._record(t, loss, snapshot)
                    recorded.add(t)
                    if bar is not None:
                        bar.set_postfix(val=f"{self.history['val_loss'][-1].mean():.4f}", refresh=False)
                self.step = t + 1
                if bar is not None:
                    bar.update(1)
                if self.report is not None:
                    self.report(len(self.specs))
                now = time.perf_counter()
                if self.checkpoint is not None and now - last_ckpt > self.checkpoint_every and self.step < steps:
                    self.source.rewind()
                    self.elapsed += now - t0
                    t0 = now
                    self._checkpoint_or_warn("training goes on, and tries again at the next checkpoint")
                    last_ckpt = time.perf_counter()
            if self.step == steps and steps not in recorded:
                with torch.no_grad():
                    final = self.stepper.final_loss(steps) if self.execution.backend == "fused" else \
                        self.model.loss(self.sampler.sample(self.tc.batch, self.generators))
                    self.watch.mark(final, steps)
                self._record(steps, final)
            self.watch.check()
            if self.step == steps:
                self.watch.check_final(self.history["val_loss"][-1])
        except KeyboardInterrupt:
            self.source.rewind()
            self.elapsed += time.perf_counter() - t0
            self.checkpoint_failed = False  # this one is always reported
            self._checkpoint_or_warn("the interrupted run resumes from its last checkpoint written, if any")
            raise
        finally:
            interrupted.restore()
            self.source.close()
            self.stepper.close()
            if single:
                torch.set_num_threads(threads)
            if bar is not None:
                bar.close()
        self.elapsed += time.perf_counter() - t0
        if self.step < steps:
            self.save_checkpoint()
            return None
        return self.results()

    def results(self) -> list[Run]:
        h = self.history
        stacked = {
            "step": torch.tensor(h["step"]),
            "train_loss": torch.stack(h["train_loss"], 1),  # (R, T)
            "val_loss": torch.stack(h["val_loss"], 1),  # (R, T)
            "KQ": torch.stack(h["KQ"], 1),  # (R, T, H, D, D)
            "OV": torch.stack(h["OV"], 1),  # (R, T, H, N, D)
        }
        runs = []
        R = len(self.specs)
        for r, s in enumerate(self.specs):
            Hr = s.model.heads
            params = {k: getattr(self.model, k)[r, :Hr].detach().cpu().clone() for k in "QKVO"}
            hist = {
                "step": stacked["step"].clone(),
                "train_loss": stacked["train_loss"][r].clone(),
                "val_loss": stacked["val_loss"][r].clone(),
                "KQ": stacked["KQ"][r, :, :Hr].clone(),
                "OV": stacked["OV"][r, :, :Hr].clone(),
            }
            meta = {
                "device": self.device.type,
                "ensemble": R,
                "seconds": self.elapsed,
                "model_steps_per_s": R * self.tc.steps / max(self.elapsed, 1e-9),
                "draw_ahead": self.draw,
                "backend": self.execution.backend,
                "cuda_graph": isinstance(self.stepper, GraphStep) and self.stepper.captured,
            }
            runs.append(Run(spec=s, params=params, history=hist, meta=meta))
        return runs


class _StepBoundarySigint:
    """While training in the main thread, turn a first SIGINT into a flag read at the next step
    boundary (true when set); a second SIGINT goes to the previous handler at once."""

    def __init__(self):
        self.flag = False
        self.previous = None
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not None:
            self.previous = signal.signal(signal.SIGINT, self._handle)  # None: a handler not set from Python

    def _handle(self, signum, frame):
        if self.flag:
            self.restore()
            signal.raise_signal(signum)
        self.flag = True

    def __bool__(self) -> bool:
        return self.flag

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
