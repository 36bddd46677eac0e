"""Training: R attention models side by side on fresh batches (paper 1, Section 2 training setup).

:class:`EnsembleTrainer` trains one ensemble of shape-compatible runs (same ``d``, ``L``, tasks,
attention kind and :class:`~icl_lib.config.TrainConfig`; seeds, head counts, noise levels and
covariances may differ).  Each model draws its initialisation and its data from its own
generators, and Adam/SGD act element-wise, so a model trained in an ensemble ends where it would
alone (up to floating-point summation order; tested).  On a CPU the ensemble is split into one
shard per thread, each trained single-threaded in its own thread (whole models per core instead of
small tensors spread over cores by OpenMP); the numbers do not depend on the number of shards.
A lone model on a multi-core CPU instead draws its next batch in a second thread while it computes
the current step, with the numbers of a one-thread loop.

On a GPU, where a step is bound by kernel launches rather than arithmetic, the batches of
``GPU_DRAW_AHEAD`` steps are drawn at once (one ``normal_`` launch per model and stream for all of
them; a checkpoint taken inside such a block resumes by drawing it again), and ``graph=True``
captures one whole step (forward, backward, Adam with its step count on the device, the
divergence bookkeeping) as a CUDA graph after a few eager warm-up steps, then replays it.  The
graph path is checked by ``.ci/gpu-check`` on a machine with a GPU (CI has none).

The history records, at the steps of ``TrainConfig.log_steps()``, the training-batch loss, the loss
on a fixed held-out validation set, and every head's ``KQ`` and ``OV`` circuits (chapter 3's
dynamics).  Long runs checkpoint atomically (temporary file, then rename) and resume to the same
parameters as an uninterrupted run, also after Ctrl-C (which ends the current step first).  A
non-finite loss stops training with an error naming the step and the learning rate.

:func:`train` is the entry point of the chapters: it looks runs up in the run cache
(:mod:`icl_lib.cache`), trains what is missing as ensembles, and stores the results.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import torch

from .circuits import PatternSummary, mu_of, omega_of, summarize_pattern
from .config import RunSpec, check_int, resolve_device, resolve_dtype
from .data import Batch, TaskSampler, derive_seed, make_generators
from .models import AttentionEnsemble

__all__ = ["EnsembleTrainer", "Run", "train", "TrainingDiverged", "validation_batch", "stack_models"]


GPU_DRAW_AHEAD = 32  # steps whose batches a GPU draws at once; part of a CUDA run's cache key
_GRAPH_WARMUP = 3  # eager steps (on a side stream) before a step is captured as a CUDA graph


def resolve_draw_ahead(draw_ahead: int | str, device: torch.device) -> int:
    """Steps whose batches are drawn at once: ``"auto"`` is 1 on a CPU (one step's batch, drawn
    while the cores are busy anyway) and :data:`GPU_DRAW_AHEAD` on a GPU (one ``normal_`` launch
    per model and stream for that many steps instead of one per step)."""
    if draw_ahead == "auto":
        return GPU_DRAW_AHEAD if torch.device(device).type == "cuda" else 1
    if isinstance(draw_ahead, str):  # the command line's text
        if not draw_ahead.strip().isdigit():
            raise ValueError(f"draw_ahead={draw_ahead!r} is invalid: accepted 'auto' or an integer in [1, 4096]")
        draw_ahead = int(draw_ahead)
    return check_int("draw_ahead", draw_ahead, 1, 4096)


def _cuda_graph(step: Callable[[], torch.Tensor]) -> tuple[Callable[[], None], torch.Tensor]:
    """Capture ``out = step()`` as a CUDA graph; returns the graph's ``replay`` and its static
    ``out``.  Capturing runs nothing: each replay then runs the captured kernels on the same memory."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph.replay, out


def _generator_states(generators: Sequence[Sequence[torch.Generator]]) -> list:
    """Every model's generator states (to rewind them to before a batch drawn ahead, or to save)."""
    return [[g.get_state() for g in gens] for gens in generators]


def _set_generator_states(generators: Sequence[Sequence[torch.Generator]], states: list) -> None:
    """Set states from :func:`_generator_states` (a checkpoint's may be on another device)."""
    for gens, sts in zip(generators, states):
        for g, st in zip(gens, sts):
            g.set_state(st.cpu() if g.device.type == "cpu" else st)


_ALLOCATOR_TUNED = False


def tune_cpu_allocator() -> None:
    """Keep MB-sized temporaries on glibc's heap instead of fresh ``mmap`` pages.

    Each training step allocates a few MB of short-lived tensors; by default glibc maps and unmaps
    them every step and the page faults cost about a quarter of a CPU step (measured with
    ``python -m icl_lib.bench``).  Process-wide and harmless elsewhere; a no-op off glibc.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return
    _ALLOCATOR_TUNED = True
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
    libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    libc.mallopt(M_TRIM_THRESHOLD, 512 * 2**20)
    libc.mallopt(M_TOP_PAD, 64 * 2**20)


class TrainingDiverged(FloatingPointError):
    """The loss became NaN or infinite; the message names the run, the step and the learning rate."""


def validation_batch(spec: RunSpec, device="cpu", dtype=torch.float32) -> Batch:
    """The fixed held-out validation set of a run: it depends only on the task (``spec.data``) and
    ``val_size``, so all runs of one task are compared on the same sequences."""
    payload = json.dumps({"data": spec.to_dict()["data"], "n": spec.train.val_size}, sort_keys=True)
    seed = int.from_bytes(hashlib.sha256(payload.encode()).digest()[:7], "big")
    gen = torch.Generator(device=torch.device(device)).manual_seed(derive_seed(seed, "val"))
    sampler = TaskSampler([spec.data], device=device, dtype=dtype)
    return sampler.sample(spec.train.val_size, [[gen]]).member(0)


def _stack_batches(batches: Sequence[Batch]) -> Batch:
    return Batch(torch.stack([b.tokens for b in batches]), torch.stack([b.beta for b in batches]))


class EnsembleTrainer:
    """Train R shape-compatible runs as one batched program (paper 1's setup; chapters 1-7).

    ``checkpoint``: a file written atomically every ``checkpoint_every`` seconds, on Ctrl-C and
    when stopped early, and resumed from when it exists.  ``compile``: ``torch.compile`` the loss
    (``"auto"``: on CUDA, unless ``graph``).  ``shards``: CPU threads each training a slice of the
    ensemble (default: one per thread).  ``draw_ahead``: steps whose batches are drawn at once
    (:func:`resolve_draw_ahead`).  ``graph``: replay each step as a CUDA graph (CUDA only).
    """

    def __init__(
        self,
        specs: Sequence[RunSpec],
        device="auto",
        checkpoint: str | os.PathLike | None = None,
        checkpoint_every: float = 60.0,
        progress: bool = True,
        compile: bool | str = "auto",
        shards: int | None = None,
        draw_ahead: int | str = "auto",
        graph: bool = False,
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
        self.device = resolve_device(device)
        self.draw = resolve_draw_ahead(draw_ahead, self.device)
        if graph not in (True, False):
            raise ValueError(f"graph={graph!r} is invalid: accepted True or False")
        if graph and self.device.type != "cuda":
            raise ValueError(f"graph=True is invalid on device {self.device.type}: accepted only on cuda (CUDA graphs)")
        if self.draw > 1 and shards not in (None, 1):
            raise ValueError(f"shards={shards} is invalid with draw_ahead={self.draw}: accepted 1 (draw-ahead is for one program)")
        if self.device.type == "cpu":
            tune_cpu_allocator()
        tc = specs[0].train
        self.tc = tc
        self.dtype = resolve_dtype(tc.dtype)
        self.model = _empty_model(specs, self.device, self.dtype)
        init_gens = [make_generators(s.seed, "init", "cpu", streams=1)[0] for s in specs]
        self.model.reset_parameters(init_gens, [s.model.init_scale for s in specs])
        self.sampler = TaskSampler([s.data for s in specs], device=self.device, dtype=self.dtype)
        self.generators = [make_generators(s.seed, "train", self.device) for s in specs]
        params = [self.model.Q, self.model.K, self.model.V, self.model.O]
        if tc.optimizer == "adam":
            opt_kw = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
            if self.device.type == "cuda":  # step count on the GPU: the same kernel eager and in a CUDA graph
                opt_kw["capturable"] = True
            self.opt = torch.optim.Adam(params, lr=tc.lr, **opt_kw)
        else:
            self.opt = torch.optim.SGD(params, lr=tc.lr)
        if all((s.data, s.train.val_size) == (specs[0].data, tc.val_size) for s in specs):
            self.val = validation_batch(specs[0], self.device, self.dtype)  # (V, ...) shared by all models
        else:
            self.val = _stack_batches([validation_batch(s, self.device, self.dtype) for s in specs])  # (R, V, ...)
        self.step = 0
        self.elapsed = 0.0
        self.first_bad = torch.full((len(specs),), -1, dtype=torch.long, device=self.device)
        self.history: dict[str, list] = {"step": [], "train_loss": [], "val_loss": [], "KQ": [], "OV": []}
        self.log_steps = tc.log_steps()
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.checkpoint_every = checkpoint_every
        # ICL_PROGRESS=0 turns the bar off: the book build sets it (book/_ext/icl_book.py), since a
        # static page has no use for it and in a notebook it is one more output of a figure cell.
        self.progress = progress and os.environ.get("ICL_PROGRESS", "1") != "0"
        P = self.sampler.numbers_per_sequence()
        self._buffer = torch.empty(len(specs), tc.batch, P, device=self.device, dtype=self.dtype)  # (R, B, P) reused
        self._batch = self.sampler.views(self._buffer)  # this step's batch when it is copied into the buffer
        # Draw-ahead (GPU): the batches of `draw` steps are drawn at once into `_chunk` (R, draw, B, P);
        # `_chunk_at` is the first step it holds (None: none), `_pre_chunk` the generator states before it.
        self._chunk = None
        self._chunk_at: int | None = None
        self._pre_chunk: list | None = None
        if self.draw > 1:
            self._chunk = torch.empty(len(specs), self.draw, tc.batch, P, device=self.device, dtype=self.dtype)
        # CUDA graph of one whole step (forward, backward, optimizer): captured after a few eager steps.
        self._graph_on = graph
        self._graph: Callable[[], None] | None = None  # replays the captured step
        self._graph_loss: torch.Tensor | None = None
        self._t_dev: torch.Tensor | None = None  # the next replay's step index, on the device (set at capture)
        self._eager_steps = 0  # eager steps since construction or the last load_state_dict
        self._loss_fn = self.model.loss if graph else self._make_loss_fn(compile)
        self._shards = self._make_shards(1 if self.draw > 1 else shards)
        if self.checkpoint is not None and self.checkpoint.exists():
            self.load_state_dict(torch.load(self.checkpoint, map_location=self.device, weights_only=True))

    # ----------------------------------------------------------------- compiled step (GPU)
    def _make_loss_fn(self, compile) -> Callable[[Batch], torch.Tensor]:
        eager = self.model.loss
        if compile == "auto":
            compile = self.device.type == "cuda"
        if not compile:
            return eager
        try:
            compiled = torch.compile(self.model.loss, dynamic=False)
        except Exception:  # noqa: BLE001 - any failure falls back to eager mode
            return eager
        state = {"fn": compiled}

        def loss_fn(batch):
            try:
                return state["fn"](batch)
            except Exception:  # noqa: BLE001 - compilation failed at first call: fall back
                state["fn"] = eager
                return eager(batch)

        return loss_fn

    # ----------------------------------------------------------------- CPU shards
    def _make_shards(self, shards: int | None) -> list["_Shard"]:
        """Split the ensemble into contiguous shards trained in parallel threads (CPU only).

        On a CPU with T threads the R models form ``min(R, T)`` shards; each shard samples its
        batch and computes its gradients single-threaded in its own thread, and one optimizer step
        then moves the whole ensemble.  Small tensors spread over cores by OpenMP spend much of a
        step synchronising; whole models per core do not (``make bench``).  A model's numbers
        do not depend on how many shards there are (tested).  One shard means the plain loop.
        """
        R = len(self.specs)
        if shards is None:
            shards = min(R, torch.get_num_threads()) if self.device.type == "cpu" else 1
        shards = check_int("shards", shards, 1, R)
        if shards > 1 and self.device.type != "cpu":
            raise ValueError(f"shards={shards} is invalid on device {self.device.type}: accepted 1 (shards are for CPUs)")
        if shards == 1:
            return []
        bounds = [R * k // shards for k in range(shards + 1)]
        out = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            model = self.model.shard(a, b)
            sampler = TaskSampler([s.data for s in self.specs[a:b]], device=self.device, dtype=self.dtype)
            buffer = torch.empty_like(self._buffer[a:b])  # its own tensor: views would share a version counter
            out.append(_Shard(model, sampler, self.generators[a:b], buffer))
        return out

    def _shard_grads(self, shard: "_Shard") -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        batch = shard.sampler.sample(self.tc.batch, shard.generators, out=shard.buffer, parallel=False)
        loss = shard.model.loss(batch)  # (R_shard,)
        grads = torch.autograd.grad(loss.sum(), list(shard.model.parameters()))  # Q, K, V, O
        return loss.detach(), grads

    def _sharded_loss(self, pool) -> torch.Tensor:
        """Losses ``(R,)`` of a fresh batch; sets every parameter's ``.grad`` (the shards' gradients)."""
        futures = [pool.submit(self._shard_grads, sh) for sh in self._shards[1:]]
        parts = [self._shard_grads(self._shards[0])] + [f.result() for f in futures]
        for i, p in enumerate(self.model.parameters()):
            p.grad = torch.cat([g[i] for _, g in parts])
        return torch.cat([loss for loss, _ in parts])

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {
            "specs": [json.dumps(s.to_dict(), sort_keys=True) for s in self.specs],
            "step": self.step,
            "elapsed": self.elapsed,
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "opt": self.opt.state_dict(),
            "generators": self._checkpoint_generator_states(),
            "first_bad": self.first_bad.clone(),
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def _checkpoint_generator_states(self) -> list:
        """The generators' states for a checkpoint: with draw-ahead, those from before the batches
        drawn ahead that are not yet all used (so that a resumed run draws them again)."""
        if self._chunk_at is not None and self.step < self._chunk_at + self.draw:
            return [[st.clone() for st in states] for states in self._pre_chunk]
        return _generator_states(self.generators)

    def load_state_dict(self, state: dict) -> None:
        mine = [json.dumps(s.to_dict(), sort_keys=True) for s in self.specs]
        if state["specs"] != mine:
            raise ValueError("checkpoint does not match these runs: accepted a checkpoint of the same RunSpecs")
        self._chunk_at = self._pre_chunk = None
        self._graph = self._graph_loss = None  # the graph holds the replaced tensors
        self._eager_steps = 0
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        _set_generator_states(self.generators, state["generators"])
        self.step = int(state["step"])
        self.elapsed = float(state["elapsed"])
        self.first_bad.copy_(state["first_bad"])
        self.history = {k: list(v) for k, v in state["history"].items()}

    def save_checkpoint(self) -> None:
        """Write the checkpoint atomically: a temporary file in the same folder, then a rename."""
        if self.checkpoint is None:
            return
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint.with_name(f".{self.checkpoint.name}.{os.getpid()}.tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, self.checkpoint)

    # ----------------------------------------------------------------- one step
    def _ahead_batch(self, t: int) -> Batch:
        """Step ``t``'s batch from the batches drawn ahead (drawing the next ``draw`` steps' when
        ``t`` is past them), copied into the step buffer."""
        k = t % self.draw
        if self._chunk_at != t - k:
            self._pre_chunk = _generator_states(self.generators)
            self.sampler.sample(self.tc.batch, self.generators, out=self._chunk, steps=self.draw)
            self._chunk_at = t - k
        self._buffer.copy_(self._chunk[:, k])
        return self._batch

    def _mark_bad(self, loss: torch.Tensor, t) -> None:
        """Remember the first step at which each model's loss was not finite (no device sync)."""
        self.first_bad.copy_(torch.where(~torch.isfinite(loss) & (self.first_bad < 0), t, self.first_bad))

    def _eager_step(self, batch: Batch, t: int) -> torch.Tensor:
        """Loss ``(R,)`` of ``batch`` at the current parameters, then one optimizer step."""
        loss = self._loss_fn(batch)  # (R,)
        self._mark_bad(loss, t)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.opt.step()
        self._eager_steps += 1
        return loss

    def _graph_body(self) -> torch.Tensor:
        """The captured step: the loss ``(R,)`` of the batch in ``_buffer``, the divergence
        bookkeeping at the step index held on the device, backward (with no gradient set: the
        graph writes fresh gradients) and the optimizer step."""
        loss = self.model.loss(self._batch)
        self._mark_bad(loss, self._t_dev)
        self._t_dev.add_(1)
        loss.sum().backward()
        self.opt.step()
        return loss

    def _capture(self, t: int) -> None:
        """Capture one step as a CUDA graph, replayed from step ``t`` on (the whole-network capture
        of torch's CUDA-graph notes: the warm-up steps before it ran eagerly on a side stream).
        Capturing runs nothing, so on failure training goes on eagerly, with a warning."""
        try:
            self._t_dev = torch.full((), t, dtype=torch.long, device=self.device)  # every later step replays
            self.opt.zero_grad(set_to_none=True)
            replay, loss = _cuda_graph(self._graph_body)
        except Exception as err:  # noqa: BLE001 - any capture failure falls back to eager steps
            import warnings

            warnings.warn(f"CUDA graph capture failed, training on without it: {err}", RuntimeWarning, stacklevel=3)
            self._graph_on = False
            self.opt.zero_grad(set_to_none=True)
            return
        self._graph, self._graph_loss = replay, loss

    def _graph_step(self) -> torch.Tensor:
        """Replay the captured step on the batch in ``_buffer``; returns its loss ``(R,)``."""
        self._graph()
        return self._graph_loss

    # ----------------------------------------------------------------- loop
    @torch.no_grad()
    def _snapshot(self) -> tuple:
        """What the history records of the current parameters: circuits and validation loss."""
        KQ, OV = self.model.circuits()
        return KQ.float().cpu(), OV.float().cpu(), self.model.loss(self.val).float().cpu()

    def _record(self, step: int, train_loss: torch.Tensor, snapshot: tuple | None = None) -> None:
        """Append step ``step`` to the history (``snapshot``: taken at that step's parameters)."""
        KQ, OV, val_loss = self._snapshot() if snapshot is None else snapshot
        self.history["step"].append(step)
        self.history["train_loss"].append(train_loss.detach().float().cpu())
        self.history["val_loss"].append(val_loss)
        self.history["KQ"].append(KQ)
        self.history["OV"].append(OV)
        self._check_finite()

    def _check_finite(self) -> None:
        bad = self.first_bad.cpu()
        if (bad >= 0).any():
            r = int(torch.nonzero(bad >= 0)[0])
            s = self.specs[r]
            raise TrainingDiverged(
                f"training loss became non-finite at step {int(bad[r])} (run seed={s.seed}, heads={s.model.heads}) "
                f"with lr={s.train.lr}: lower the learning rate"
            )

    def run(self, until: int | None = None, stop=None) -> list["Run"] | None:
        """Train up to step ``until`` (default: the configured ``steps``).

        Returns the finished runs when training is complete, ``None`` when stopped early at
        ``until`` (the checkpoint, if any, then holds the state).  A ``KeyboardInterrupt``
        writes the checkpoint before it propagates; so does setting ``stop`` (a
        ``threading.Event``, set by :func:`train` to stop the other threads' runs).  In the main
        thread a first Ctrl-C (SIGINT) lets the current step finish, so that the checkpoint
        resumes to the numbers of an uninterrupted run; a second one interrupts at once.
        """
        steps = self.tc.steps
        until = steps if until is None else check_int("until", until, 0, steps)
        log_set = set(self.log_steps)
        recorded = set(self.history["step"])
        bar = None
        if self.progress and until > self.step:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, initial=self.step, desc=f"train R={len(self.specs)}", leave=False, mininterval=0.5)
        t0 = time.perf_counter()
        last_ckpt = t0
        pool, threads = None, torch.get_num_threads()
        # A lone model on a CPU with spare cores draws its next batch in a second thread while it
        # computes this step (both single-threaded); an ensemble uses its cores through shards.
        prefetch = (
            self.device.type == "cpu" and not self._shards and len(self.specs) == 1 and threads > 1 and self.draw == 1
        )
        side = None  # a graph's warm-up steps run on a side stream (torch's CUDA-graph notes)
        if self._graph_on and self._graph is None and until > self.step and self.device.type == "cuda":
            side = torch.cuda.Stream(self.device)
        if (self._shards or prefetch) and until > self.step:
            from concurrent.futures import ThreadPoolExecutor

            workers = max(1, len(self._shards) - 1)
            pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
            torch.set_num_threads(1)
        pending: _Prefetch | None = None
        spare = torch.empty_like(self._buffer) if prefetch else None
        interrupted = _StepBoundarySigint()
        try:
            while self.step < until:
                if (stop is not None and stop.is_set()) or interrupted:
                    raise KeyboardInterrupt
                t = self.step
                snapshot = self._snapshot() if t in log_set and t not in recorded else None
                if self._shards:
                    loss = self._sharded_loss(pool)  # (R,), gradients set
                    self._mark_bad(loss, t)
                    self.opt.step()
                else:
                    if pending is not None:
                        batch, pending = pending.future.result(), None
                        self._buffer, spare = spare, self._buffer  # the prefetched buffer is now this step's
                    elif self.draw > 1:
                        batch = self._ahead_batch(t)
                    else:
                        batch = self.sampler.sample(self.tc.batch, self.generators, out=self._buffer)
                    if prefetch and t + 1 < until:
                        pending = _Prefetch.submit(pool, self.sampler, self.tc.batch, self.generators, spare)
                    if self._graph_on and self._graph is None and self._eager_steps >= _GRAPH_WARMUP:
                        self._capture(t)
                    if self._graph is not None:
                        loss = self._graph_step()
                    elif side is not None:
                        side.wait_stream(torch.cuda.current_stream(self.device))
                        with torch.cuda.stream(side):
                            loss = self._eager_step(batch, t)
                        torch.cuda.current_stream(self.device).wait_stream(side)
                    else:
                        loss = self._eager_step(batch, t)
                if snapshot is not None:
                    self._record(t, loss, snapshot)
                    recorded.add(t)
                    if bar is not None:
                        bar.set_postfix(val=f"{self.history['val_loss'][-1].mean():.4f}", refresh=False)
                self.step = t + 1
                if bar is not None:
                    bar.update(1)
                now = time.perf_counter()
                if self.checkpoint is not None and now - last_ckpt > self.checkpoint_every and self.step < steps:
                    pending = _Prefetch.cancel(pending, self.generators)
                    self.elapsed += now - t0
                    t0 = now
                    self.save_checkpoint()
                    last_ckpt = time.perf_counter()
            if self.step == steps and steps not in recorded:
                with torch.no_grad():
                    final = self.model.loss(self.sampler.sample(self.tc.batch, self.generators))
                    self._mark_bad(final, steps)
                self._record(steps, final)
            self._check_finite()
        except KeyboardInterrupt:
            pending = _Prefetch.cancel(pending, self.generators)
            self.elapsed += time.perf_counter() - t0
            self.save_checkpoint()
            raise
        finally:
            interrupted.restore()
            _Prefetch.cancel(pending, self.generators)  # an error mid-step: leave the generators at this step
            if pool is not None:
                pool.shutdown()
                torch.set_num_threads(threads)
            if bar is not None:
                bar.close()
        self.elapsed += time.perf_counter() - t0
        if self.step < steps:
            self.save_checkpoint()
            return None
        return self.results()

    def results(self) -> list["Run"]:
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
                "cuda_graph": self._graph is not None,
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


class _Prefetch(NamedTuple):
    """The next step's batch being drawn in another thread, and the generator states before it."""

    future: object  # concurrent.futures.Future -> Batch
    states: list

    @classmethod
    def submit(cls, pool, sampler: TaskSampler, batch: int, generators, out: torch.Tensor) -> "_Prefetch":
        states = _generator_states(generators)
        return cls(pool.submit(sampler.sample, batch, generators, out=out, parallel=False), states)

    @staticmethod
    def cancel(pending: "_Prefetch | None", generators) -> None:
        """Wait for a batch drawn ahead and rewind the generators to before it (so a checkpoint
        saved now resumes to the numbers of an uninterrupted run).  Returns ``None``."""
        if pending is not None:
            pending.future.exception()  # wait; an error there is the next draw's to raise
            _set_generator_states(generators, pending.states)
        return None


class _Shard(NamedTuple):
    """Models ``a:b`` of an ensemble: a view model, its sampler, generators and batch buffer."""

    model: AttentionEnsemble
    sampler: TaskSampler
    generators: list
    buffer: torch.Tensor


@dataclass
class Run:
    """One trained model: its spec, final parameters, history and timing (chapters 1-7)."""

    spec: RunSpec
    params: dict  # Q, K, V (H, D, D) and O (H, N, D), on the CPU
    history: dict  # step (T,), train_loss (T,), val_loss (T,), KQ (T, H, D, D), OV (T, H, N, D)
    meta: dict = field(default_factory=dict)  # device, ensemble size, seconds, model_steps_per_s, cached

    @property
    def d(self) -> int:
        return self.spec.data.d

    @property
    def KQ(self) -> torch.Tensor:
        """Final ``KQ_h`` circuits, ``(H, D, D)``."""
        return self.history["KQ"][-1]

    @property
    def OV(self) -> torch.Tensor:
        """Final ``OV_h`` circuits, ``(H, N, D)``."""
        return self.history["OV"][-1]

    @property
    def omega(self) -> torch.Tensor:
        return omega_of(self.KQ, self.d)

    @property
    def mu(self) -> torch.Tensor:
        return mu_of(self.OV, self.d)

    @property
    def val_loss(self) -> float:
        return float(self.history["val_loss"][-1])

    def pattern(self) -> PatternSummary:
        return summarize_pattern(self.KQ, self.OV, self.d)

    def model(self, device="cpu", dtype=torch.float64) -> AttentionEnsemble:
        """The trained model as an ensemble of one."""
        return stack_models([self], device=device, dtype=dtype)


def _norm_length(spec: RunSpec) -> int | None:
    """Linear attention's fixed normaliser: the configured one, else the training length L."""
    m = spec.model
    return m.norm_length or (spec.data.L if m.attention == "linear" else None)


def _empty_model(specs: Sequence[RunSpec], device, dtype) -> AttentionEnsemble:
    """A zero :class:`AttentionEnsemble` with one model per spec (same d, tasks, attention kind)."""
    s0 = specs[0]
    shape0 = (s0.data.d, s0.data.n_tasks, s0.model.attention, _norm_length(s0))
    for k, s in enumerate(specs):
        if (s.data.d, s.data.n_tasks, s.model.attention, _norm_length(s)) != shape0:
            raise ValueError(
                f"specs[{k}] has another d, number of tasks, attention kind or linear normaliser than specs[0]: "
                "accepted models of one architecture"
            )
    return AttentionEnsemble(
        [s.model.heads for s in specs],
        s0.data.d,
        n_tasks=s0.data.n_tasks,
        attention=s0.model.attention,
        norm_length=_norm_length(s0),
        device=device,
        dtype=dtype,
    )


def stack_models(runs: Sequence[Run], device="cpu", dtype=torch.float64) -> AttentionEnsemble:
    """Trained runs (one architecture: same ``d``, tasks and attention kind) as one
    :class:`AttentionEnsemble` for batched evaluation (chapter 5's length generalisation, for instance)."""
    runs = list(runs)
    model = _empty_model([r.spec for r in runs], device, dtype)
    with torch.no_grad():
        for i, r in enumerate(runs):
            H = r.spec.model.heads
            for k in "QKVO":
                getattr(model, k)[i, :H] = r.params[k].to(device, dtype)
    return model.requires_grad_(False)


def _cost(chunk: Sequence[str], todo: dict) -> float:
    s = todo[chunk[0]]
    return len(chunk) * s.train.steps * (s.data.L + 1) * (s.data.d + s.data.n_tasks)


def _schedule(chunks: list, todo: dict, dev: torch.device) -> tuple[list, list]:
    """Split ensembles into those trained one after another on all threads (``solo``, largest
    first) and those trained side by side, one single-threaded ensemble per thread (``together``).

    On a CPU with T threads an ensemble goes solo while it costs more than 1/T of the work left (it
    alone would keep the cores busy, split into shards); the rest run together, largest first.
    """
    threads = torch.get_num_threads() if dev.type == "cpu" else 1
    order = sorted(chunks, key=lambda c: _cost(c, todo), reverse=True)
    if threads == 1 or len(order) == 1:
        return order, []
    solo = []
    while order and _cost(order[0], todo) * threads > sum(_cost(c, todo) for c in order):
        solo.append(order.pop(0))
    return solo, order


def _train_concurrently(chunks: list, train_chunk: Callable) -> None:
    """Run ``train_chunk(chunk, shards=1)`` for every chunk on a pool of single-threaded workers.

    A ``KeyboardInterrupt`` asks every worker to checkpoint and stop, then propagates.
    """
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    workers = min(torch.get_num_threads(), len(chunks))
    with ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        futures = [pool.submit(train_chunk, c, 1, stop) for c in chunks]
        try:
            for f in futures:
                f.result()
        except BaseException:
            stop.set()
            for f in futures:
                f.cancel()
            raise


def train(
    specs: Sequence[RunSpec],
    device="auto",
    cache: bool = True,
    progress: bool = True,
    max_ensemble: int = 64,
    graph: bool | None = None,
) -> list[Run]:
    """Train (or load from the run cache) every spec; returns one :class:`Run` per spec, in order.

    Runs missing from the cache are grouped by shape into ensembles of at most ``max_ensemble``
    models; on a CPU, small ensembles train side by side, one per thread (:func:`_schedule`).
    With ``cache=True`` a run in progress checkpoints into the cache folder and resumes there if
    interrupted; two processes asking for the same runs train them once (the second waits on a
    file lock, then loads).  ``graph`` captures each step as a CUDA graph (GPU only; ``None``:
    when the environment variable ``ICL_CUDA_GRAPH`` is ``1``).
    """
    from .cache import RunCache

    specs = list(specs)
    for k, s in enumerate(specs):
        if not isinstance(s, RunSpec):
            raise ValueError(f"specs[{k}]={s!r} is invalid: accepted a RunSpec")
    max_ensemble = check_int("max_ensemble", max_ensemble, 1)
    dev = resolve_device(device)
    if graph is None:
        graph = dev.type == "cuda" and os.environ.get("ICL_CUDA_GRAPH", "0") == "1"
    draw = resolve_draw_ahead("auto", dev)
    keys = [s.key(dev.type, draw) for s in specs]
    store = RunCache() if cache else None
    found: dict[str, Run] = {}
    if store is not None:
        for key in set(keys):
            run = store.load(key)
            if run is not None:
                found[key] = run
    todo: dict[str, RunSpec] = {}
    for key, s in zip(keys, specs):
        if key not in found:
            todo[key] = s
    groups: dict[tuple, list[str]] = {}
    for key, s in todo.items():
        groups.setdefault(s.group_key(), []).append(key)
    chunks = [group[i : i + max_ensemble] for group in groups.values() for i in range(0, len(group), max_ensemble)]

    def train_chunk(chunk: list[str], shards: int | None = None, stop=None) -> None:
        if store is None:
            runs = EnsembleTrainer(
                [todo[k] for k in chunk], dev, progress=progress, shards=shards, draw_ahead=draw, graph=graph
            ).run(stop=stop)
            found.update(zip(chunk, runs))
            return
        with store.locked(chunk):
            missing = []
            for k in chunk:
                run = store.load(k)
                if run is None:
                    missing.append(k)
                else:
                    found[k] = run
            if not missing:
                return
            ckpt = store.checkpoint_path(missing)
            trainer = EnsembleTrainer(
                [todo[k] for k in missing], dev, checkpoint=ckpt, progress=progress, shards=shards, draw_ahead=draw, graph=graph
            )
            runs = trainer.run(stop=stop)
            for k, run in zip(missing, runs):
                store.save(k, run)
                found[k] = run
            ckpt.unlink(missing_ok=True)

    solo, together = _schedule(chunks, todo, dev)
    for chunk in solo:
        train_chunk(chunk)
    if together:
        _train_concurrently(together, train_chunk)
    return [found[key] for key in keys]
