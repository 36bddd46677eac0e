"""One optimiser step of an ensemble, in the three ways the engine can take it.

* :class:`EagerStep`   -- loss, backward and optimiser step as ordinary PyTorch calls;
* :class:`ShardedStep` -- a CPU ensemble split into shards: each shard draws its batch and computes
  its gradients single-threaded in its own thread (whole models per core instead of small tensors
  spread over cores by OpenMP, whose synchronisation cost about a third of a step), then one
  optimiser step moves the whole ensemble; a model's numbers do not depend on the number of shards;
* :class:`GraphStep`   -- a GPU: after a few eager warm-up steps on a side stream the whole step
  (loss, divergence bookkeeping with the step index on the device, backward, fused Adam with its
  step count on the device) is captured once as a CUDA graph and replayed; a failed capture falls
  back to eager steps with a warning.

Every step calls ``step(batch, t)`` with the batch of its :mod:`~icl_lib.engine.sources` source and
returns the models' losses ``(R,)``; a :class:`DivergenceWatch` remembers, without a device sync,
the first step at which each model's loss was not finite.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Sequence

import torch

from ..config import RunSpec
from ..sampling import Batch, TaskSampler
from ..models import AttentionEnsemble
from ..validate import check_int

__all__ = [
    "TrainingDiverged",
    "DivergenceWatch",
    "SPIKE_FACTOR",
    "FINAL_FACTOR",
    "EagerStep",
    "ShardedStep",
    "GraphStep",
    "Shard",
    "make_shards",
    "make_loss_fn",
    "capture_cuda_graph",
    "GRAPH_WARMUP",
]

GRAPH_WARMUP = 3  # eager steps (on a side stream) before a step is captured as a CUDA graph


class TrainingDiverged(FloatingPointError):
    """The loss became NaN or infinite; the message names the run, the step and the learning rate."""


SPIKE_FACTOR = 1000.0  # a training loss above this multiple of predicting 0, at any step: diverged
FINAL_FACTOR = 2.0  # a final validation loss above this multiple of predicting 0: diverged


class DivergenceWatch:
    """Divergence of each model, judged by its loss against the loss of predicting 0 (``zero_loss``,
    ``(R,)``, on the validation sequences), for every optimiser.

    A model has diverged when its training loss at some step is not finite or blows up to more
    than :data:`SPIKE_FACTOR` times ``zero_loss`` (:meth:`mark` records the first such step on the
    device, without a sync; :meth:`check` raises), or when its final validation loss is more than
    :data:`FINAL_FACTOR` times it (:meth:`check_final`).  Measured with Adam at d = 5, L = 40,
    H = 1, 2, 4, three seeds, 300 steps: the largest training-batch loss was at most 1.1 times the
    trivial one at lr = 0.1, 10.5 at lr = 0.3, 191 at lr = 0.5 (runs that then learn, ending at
    0.28-0.97 times it), 235-4,302 at lr = 1 (ending at 0.97-1.58) and 1.7e5-1.8e6 at lr = 5
    (ending at up to 16 times).  A diverged run raises :class:`TrainingDiverged`, so it is never
    returned and never cached.
    """

    def __init__(self, specs: Sequence[RunSpec], zero_loss: torch.Tensor):
        self.specs = list(specs)
        self.zero_loss = zero_loss  # (R,) on the training device
        self.limit = SPIKE_FACTOR * zero_loss
        self.first_bad = torch.full((len(self.specs),), -1, dtype=torch.long, device=zero_loss.device)
        self.bad_loss = torch.zeros_like(zero_loss)  # the loss at the first bad step

    def mark(self, loss: torch.Tensor, t) -> None:
        """Remember step ``t`` (an int or a device tensor) for models whose ``loss`` diverged now."""
        new = ~(loss.detach() <= self.limit) & (self.first_bad < 0)  # NaN and inf compare False
        self.first_bad.copy_(torch.where(new, t, self.first_bad))
        self.bad_loss.copy_(torch.where(new, loss.detach().to(self.bad_loss.dtype), self.bad_loss))

    def check(self) -> None:
        """Raise :class:`TrainingDiverged` for the first model whose loss diverged."""
        bad = self.first_bad.cpu()
        if (bad >= 0).any():
            r = int(torch.nonzero(bad >= 0)[0])
            value = float(self.bad_loss[r])
            what = (f"{value:.4g}, {value / float(self.zero_loss[r]):.3g} times that of predicting 0 (accepted at "
                    f"most {SPIKE_FACTOR:g})") if math.isfinite(value) else "non-finite"
            self._raise(r, f"the training loss at step {int(bad[r])} was {what}")

    def check_final(self, val_loss: torch.Tensor) -> None:
        """Raise :class:`TrainingDiverged` when a model's final validation loss ``(R,)`` is more than
        :data:`FINAL_FACTOR` times that of predicting 0."""
        ratio = (val_loss.double().cpu() / self.zero_loss.double().cpu()).reshape(-1)
        bad = torch.nonzero(~(ratio <= FINAL_FACTOR))
        if len(bad):
            r = int(bad[0])
            self._raise(r, f"the final validation loss was {float(val_loss.reshape(-1)[r]):.4g}, "
                        f"{float(ratio[r]):.3g} times that of predicting 0 (accepted at most {FINAL_FACTOR:g})")

    def _raise(self, r: int, what: str) -> None:
        s = self.specs[r]
        raise TrainingDiverged(
            f"training diverged: {what} (run seed={s.seed}, heads={s.model.heads}) with lr={s.train.lr}: "
            "lower the learning rate"
        )


def make_loss_fn(model: AttentionEnsemble, compile: bool) -> Callable[[Batch], torch.Tensor]:
    """``model.loss``, or its ``torch.compile`` form with an eager fallback when compilation fails."""
    eager = model.loss
    if not compile:
        return eager
    try:
        compiled = torch.compile(model.loss, dynamic=False)
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


class _Step:
    """Shared parts of a step: ``begin``/``close`` bracket a stretch of training, ``reset`` follows
    a checkpoint load; ``single_threaded``: the calling thread trains with one intra-op thread."""

    single_threaded = False

    def begin(self, until: int) -> None:
        pass

    def close(self) -> None:
        pass

    def reset(self) -> None:
        pass


class EagerStep(_Step):
    """Loss ``(R,)`` of the batch at the current parameters, then one optimiser step."""

    def __init__(self, opt: torch.optim.Optimizer, loss_fn: Callable[[Batch], torch.Tensor], watch: DivergenceWatch):
        self.opt, self.loss_fn, self.watch = opt, loss_fn, watch

    def __call__(self, batch: Batch, t: int) -> torch.Tensor:
        loss = self.loss_fn(batch)  # (R,)
        self.watch.mark(loss, t)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.opt.step()
        return loss


class Shard(NamedTuple):
    """Models ``a:b`` of an ensemble: a view model, its sampler, generators and batch buffer."""

    model: AttentionEnsemble
    sampler: TaskSampler
    generators: list
    buffer: torch.Tensor


def make_shards(
    model: AttentionEnsemble, specs: Sequence[RunSpec], generators: list, buffer: torch.Tensor, shards: int | None
) -> list[Shard]:
    """Split the ensemble into contiguous shards trained in parallel threads (CPU only).

    On a CPU with T threads the R models form ``min(R, T)`` shards by default.  One shard means
    the plain loop (returns ``[]``).
    """
    R = len(specs)
    device = buffer.device
    if shards is None:
        shards = min(R, torch.get_num_threads()) if device.type == "cpu" else 1
    shards = check_int("shards", shards, 1, R)
    if shards > 1 and device.type != "cpu":
        raise ValueError(f"shards={shards} is invalid on device {device.type}: accepted 1 (shards are for CPUs)")
    if shards == 1:
        return []
    bounds = [R * k // shards for k in range(shards + 1)]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        sampler = TaskSampler([s.data for s in specs[a:b]], device=device, dtype=buffer.dtype)
        part = torch.empty_like(buffer[a:b])  # its own tensor: views would share a version counter
        out.append(Shard(model.shard(a, b), sampler, generators[a:b], part))
    return out


class ShardedStep(_Step):
    """Each shard draws its slice of the batch and computes its gradients in its own thread (shard 0
    in the calling thread); the gradients are concatenated and one optimiser step follows."""

    single_threaded = True

    def __init__(self, model: AttentionEnsemble, opt: torch.optim.Optimizer, shards: list[Shard], watch: DivergenceWatch):
        self.model, self.opt, self.shards, self.watch = model, opt, shards, watch
        self.pool: ThreadPoolExecutor | None = None

    def begin(self, until: int) -> None:
        self.pool = ThreadPoolExecutor(max(1, len(self.shards) - 1), initializer=torch.set_num_threads, initargs=(1,))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    @staticmethod
    def _grads(shard: Shard, draw: Callable[[], Batch]) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        loss = shard.model.loss(draw())  # (R_shard,)
        grads = torch.autograd.grad(loss.sum(), list(shard.model.parameters()))  # Q, K, V, O
        return loss.detach(), grads

    def __call__(self, draws: Sequence[Callable[[], Batch]], t: int) -> torch.Tensor:
        futures = [self.pool.submit(self._grads, sh, dr) for sh, dr in zip(self.shards[1:], draws[1:])]
        parts = [self._grads(self.shards[0], draws[0])] + [f.result() for f in futures]
        for i, p in enumerate(self.model.parameters()):
            p.grad = torch.cat([g[i] for _, g in parts])
        loss = torch.cat([loss for loss, _ in parts])  # (R,)
        self.watch.mark(loss, t)
        self.opt.step()
        return loss


def capture_cuda_graph(step: Callable[[], torch.Tensor]) -> tuple[Callable[[], None], torch.Tensor]:
    """Capture ``out = step()`` as a CUDA graph; returns the graph's ``replay`` and its static
    ``out``.  Capturing runs nothing: each replay then runs the captured kernels on the same memory."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph.replay, out


class GraphStep(_Step):
    """Eager warm-up steps (on a side stream on CUDA), then the whole step captured as a CUDA graph
    and replayed on the batch in ``static`` (the views of the source's buffer), from the step at
    which it was captured on (torch's whole-network capture)."""

    def __init__(self, model: AttentionEnsemble, opt: torch.optim.Optimizer, static: Batch, watch: DivergenceWatch,
                 device: torch.device):
        self.model, self.opt, self.static, self.watch, self.device = model, opt, static, watch, device
        self.eager = EagerStep(opt, model.loss, watch)
        self.enabled = True  # False after a failed capture
        self.replay: Callable[[], None] | None = None
        self.loss: torch.Tensor | None = None  # the graph's static output
        self.t_dev: torch.Tensor | None = None  # the next replay's step index, on the device
        self.eager_steps = 0  # eager steps since construction or the last reset
        self.side = None  # the warm-up steps' side stream (torch's CUDA-graph notes)

    @property
    def captured(self) -> bool:
        return self.replay is not None

    def begin(self, until: int) -> None:
        if self.enabled and self.replay is None and self.device.type == "cuda":
            self.side = torch.cuda.Stream(self.device)

    def close(self) -> None:
        self.side = None

    def reset(self) -> None:
        self.replay = self.loss = None  # the graph holds the replaced tensors
        self.eager_steps = 0

    def _body(self) -> torch.Tensor:
        """The captured step: the loss of the static batch, the divergence bookkeeping at the step
        index held on the device, backward (no gradient set: the graph writes fresh gradients) and
        the optimiser step."""
        loss = self.model.loss(self.static)
        self.watch.mark(loss, self.t_dev)
        self.t_dev.add_(1)
        loss.sum().backward()
        self.opt.step()
        return loss

    def _capture(self, t: int) -> None:
        """Capture one step, replayed from step ``t`` on; on failure train on eagerly, with a warning."""
        try:
            self.t_dev = torch.full((), t, dtype=torch.long, device=self.device)  # every later step replays
            self.opt.zero_grad(set_to_none=True)
            self.replay, self.loss = capture_cuda_graph(self._body)
        except Exception as err:  # noqa: BLE001 - any capture failure falls back to eager steps
            warnings.warn(f"CUDA graph capture failed, training on without it: {err}", RuntimeWarning, stacklevel=3)
            self.enabled = False
            self.replay = None
            self.opt.zero_grad(set_to_none=True)

    def __call__(self, batch: Batch, t: int) -> torch.Tensor:
        if self.enabled and self.replay is None and self.eager_steps >= GRAPH_WARMUP:
            self._capture(t)
        if self.replay is not None:
            self.replay()
            return self.loss
        if self.side is not None:
            current = torch.cuda.current_stream(self.device)
            self.side.wait_stream(current)
            with torch.cuda.stream(self.side):
                loss = self.eager(batch, t)
            current.wait_stream(self.side)
        else:
            loss = self.eager(batch, t)
        self.eager_steps += 1
        return loss
