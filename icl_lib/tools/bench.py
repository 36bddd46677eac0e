"""Benchmark: training speed of the ensemble engine against a plain reference implementation.

    python -m icl_lib.tools.bench [--device cpu|cuda|auto] [--ensembles 1 8 32] [--seconds 4] [--graph on|off]

Measures model-steps per second (one Adam step of one model on a fresh batch) for paper 1's
setting H = 4, d = 5, L = 40, batch 256:

* the reference: the model written the usual way -- ``nn.Linear`` projections of every token for
  each head's Q, K, V and O, fresh data from ``torch.randn``, ``torch.optim.Adam``, one model at a
  time (:class:`ReferenceAttention`, tested to compute the same function as the engine);
* the engine (:class:`~icl_lib.engine.trainer.EnsembleTrainer`) with ensembles of R models, on a
  CPU with both backends: ``eager`` (PyTorch ops) and ``fused`` (:mod:`icl_lib.engine.fused`);
* on a CPU, per-core floors of an eager step (each single-threaded): ``normal_`` alone, the
  engine's sampler, and forward + backward + Adam on a fixed batch; their *ceiling* is the rate
  of sampler and compute on every core at once; and of a fused step: its in-loop random numbers
  alone and the whole fused step on one thread.  The rows are set against the CPU targets
  (eager: R = 32 3,000 model-steps/s, R = 1 8x the reference; fused: R = 32 3.5x, R = 1 7x the
  eager engine of the same run);
* on a GPU, the share of a step spent drawing the fresh Gaussian numbers.

Both are measured in the same process, interleaved, and the median of ``--repeats`` timed windows
is reported, so the ratios are robust to a busy machine.  On a CPU the first lines name its model
and the target numba compiled the fused kernels for (CPU name and vector instructions, e.g. AVX2
or AVX-512; ``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=`` compiles for AVX2 on any x86-64 CPU that
has it), so a figure says where it came from; where the fused backend cannot run (:func:`~icl_lib.engine.execution.fused_unavailable`)
only the eager rows are measured.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time

import torch
from torch import nn

from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig, resolve_device
from ..engine.execution import cpu_description, fused_unavailable, resolve_draw_ahead
from ..engine.trainer import EnsembleTrainer
from ..validate import check_float, check_int

__all__ = ["ReferenceAttention", "reference_step_fn", "measure", "main"]


class ReferenceAttention(nn.Module):
    """Paper 1's H-head attention written the usual way (benchmark baseline, eq. 2.2).

    Every head projects every token with its own ``nn.Linear`` Q, K, V (``D x D``) and O
    (``D -> 1``); the query ``(x_q, 0)`` attends to the L context tokens.
    """

    def __init__(self, heads: int, d: int):
        super().__init__()
        D = d + 1
        self.d, self.D = d, D
        self.q = nn.ModuleList(nn.Linear(D, D, bias=False) for _ in range(heads))
        self.k = nn.ModuleList(nn.Linear(D, D, bias=False) for _ in range(heads))
        self.v = nn.ModuleList(nn.Linear(D, D, bias=False) for _ in range(heads))
        self.o = nn.ModuleList(nn.Linear(D, 1, bias=False) for _ in range(heads))

    def forward(self, Z: torch.Tensor, zq: torch.Tensor) -> torch.Tensor:
        """``Z (B, L, D)`` context tokens, ``zq (B, D)`` query token; returns ``(B,)``."""
        out = 0.0
        for q, k, v, o in zip(self.q, self.k, self.v, self.o):
            scores = (k(Z) @ q(zq)[:, :, None])[:, :, 0] / math.sqrt(self.D)  # (B, L)
            attn = torch.softmax(scores, dim=-1)
            out = out + o((attn[:, :, None] * v(Z)).sum(1))  # (B, 1)
        return out[:, 0]


def reference_step_fn(model: ReferenceAttention, d: int, L: int, sigma2: float, batch: int, lr: float, device):
    """One training step of the reference: fresh data, forward, backward, Adam."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def step():
        x = torch.randn(batch, L + 1, d, device=device)
        beta = torch.randn(batch, d, 1, device=device) / math.sqrt(d)
        y = (x @ beta)[:, :, 0] + math.sqrt(sigma2) * torch.randn(batch, L + 1, device=device)
        Z = torch.cat([x[:, :L], y[:, :L, None]], -1)
        zq = torch.cat([x[:, L], torch.zeros(batch, 1, device=device)], -1)
        loss = ((model(Z, zq) - y[:, L]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def _rate(fn, seconds: float, sync) -> float:
    """Calls per second of ``fn`` over a window of about ``seconds``."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        if n % 5 == 0:
            sync()
            if time.perf_counter() - t0 > seconds:
                return n / (time.perf_counter() - t0)


CPU_TARGETS = {32: ("model-steps/s", 3000.0), 1: ("x the reference", 8.0)}  # the eager engine's CPU targets
FUSED_TARGETS = {32: 3.5, 1: 7.0}  # the fused backend's targets: times the eager engine's rate, same run


def _single_threaded_rate(fn, seconds: float) -> float:
    """Calls per second of ``fn`` with one intra-op thread (a per-core floor)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn()
        return _rate(fn, seconds, lambda: None)
    finally:
        torch.set_num_threads(threads)


def _cpu_floors(tr: EnsembleTrainer, B: int, seconds: float) -> dict:
    """Per-core costs of one engine step of ``tr``'s R models on a CPU, each single-threaded:

    * ``normals``: one ``normal_`` call drawing the Gaussian numbers of R model-steps (torch's CPU
      generator: the cost of the randomness alone);
    * ``sampler``: the engine's sampler as a shard calls it (``parallel=False``): the numbers
      drawn per model and stream, then turned into each model's sequences;
    * ``compute``: forward, backward and the Adam step on a fixed batch (no sampling).

    ``ceiling`` is the engine's rate were its work to spread perfectly over the T cores: for an
    ensemble, T shards each sampling and computing, ``T / (1/sampler + 1/compute)``; for a lone
    model (R = 1) on several cores, the next batch is drawn in a second thread while the step
    computes, so ``min(sampler, compute)`` (model-steps/s)."""
    R, P = len(tr.specs), tr.sampler.numbers_per_sequence()
    flat = torch.empty(R * B * P)
    gen = torch.Generator().manual_seed(0)
    buffer = torch.empty(R, B, P)
    batch = tr.sampler.sample(B, tr.generators, out=buffer.clone())

    def compute():
        loss = tr.model.loss(batch)
        tr.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        tr.opt.step()

    floors = {
        "normals": _single_threaded_rate(lambda: flat.normal_(generator=gen), seconds) * R,
        "sampler": _single_threaded_rate(lambda: tr.sampler.sample(B, tr.generators, out=buffer, parallel=False),
                                         seconds) * R,
        "compute": _single_threaded_rate(compute, seconds) * R,
    }
    threads = torch.get_num_threads()
    if R == 1 and threads > 1:
        floors["ceiling"] = min(floors["sampler"], floors["compute"])
    else:
        floors["ceiling"] = min(R, threads) / (1 / floors["sampler"] + 1 / floors["compute"])
    return floors


def measure(device="auto", ensembles=(1, 8, 32), seconds: float = 4.0, repeats: int = 3, heads: int = 4,
            compile: bool | str = "auto", graph: bool = False, draw_ahead: int | str = "auto"):
    """Return a list of result rows (dicts) for the reference and each ensemble size.

    On a CPU each engine row also holds the per-core floors of :func:`_cpu_floors` (medians of the
    same interleaved windows); on a GPU its sampling share: the engine's rate over the rate of
    drawing the batches alone."""
    dev = resolve_device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    d, L, s2, B, lr = 5, 40, 0.1, 256, 1e-3
    torch.manual_seed(0)
    ref = ReferenceAttention(heads, d).to(dev)
    ref_step = reference_step_fn(ref, d, L, s2, B, lr, dev)
    tc = TrainConfig(steps=100_000_000, batch=B, lr=lr, n_log=2, val_size=256)
    trainers, fused, fused_one = {}, {}, {}
    for R in ensembles:
        specs = [RunSpec(DataConfig(d=d, L=L, sigma2=s2), ModelConfig(heads=heads), tc, seed=r) for r in range(R)]
        trainers[R] = EnsembleTrainer(specs, dev, progress=False, compile=compile, graph=graph, draw_ahead=draw_ahead,
                                      backend="eager")
        if dev.type == "cpu" and fused_unavailable() is None:
            fused[R] = EnsembleTrainer(specs, dev, progress=False, backend="fused")
            fused_one[R] = EnsembleTrainer(specs, dev, progress=False, backend="fused", shards=1)  # one core

    chunk = 25  # engine steps per timed call: run() checks for divergence (a device sync) once per call

    def engine_step(tr):
        return lambda: tr.run(until=tr.step + chunk)

    def sample_only(tr):  # one step's batch (with draw-ahead: 1/K of drawing K steps' batches)
        if tr.draw > 1:
            return lambda: tr.sampler.sample(B, tr.generators, out=tr.source.chunk, steps=tr.draw)
        buffer = torch.empty(len(tr.specs), B, tr.sampler.numbers_per_sequence(), device=dev)
        return lambda: tr.sampler.sample(B, tr.generators, out=buffer)

    for _ in range(10):  # warm up everything (allocator, thread pool, compilation)
        ref_step()
    for tr in [*trainers.values(), *fused.values(), *fused_one.values()]:
        engine_step(tr)()
    rates = {"ref": []} | {R: [] for R in ensembles} | {("floor", R): [] for R in ensembles}
    rates |= {("fused", R): [] for R in fused} | {("fused1", R): [] for R in fused} | {("rng", R): [] for R in fused}
    for _ in range(repeats):  # interleaved windows
        rates["ref"].append(_rate(ref_step, seconds, sync))
        for R, tr in trainers.items():
            rates[R].append(_rate(engine_step(tr), seconds, sync) * R * chunk)
            if dev.type == "cpu":
                rates[("floor", R)].append(_cpu_floors(tr, B, seconds / 4))
            if R in fused:
                rates[("fused", R)].append(_rate(engine_step(fused[R]), seconds, sync) * R * chunk)
                rates[("fused1", R)].append(_rate(engine_step(fused_one[R]), seconds / 4, sync) * R * chunk)
                rates[("rng", R)].append(_fused_normals_rate(fused[R], seconds / 4))
            if dev.type != "cpu":
                rates[("floor", R)].append(_rate(sample_only(tr), seconds / 2, sync) * R * tr.draw)
    ref_rate = statistics.median(rates["ref"])
    rows = [{"impl": "reference (nn.Linear, one model)", "R": 1, "model_steps_per_s": ref_rate, "ratio": 1.0}]
    for R in ensembles:
        r = statistics.median(rates[R])
        row = {"impl": "engine", "R": R, "model_steps_per_s": r, "ratio": r / ref_rate}
        floors = rates[("floor", R)]
        if dev.type == "cpu":
            row |= {f"{k}_per_core": statistics.median(f[k] for f in floors) for k in ("normals", "sampler", "compute")}
            row["ceiling"] = statistics.median(f["ceiling"] for f in floors)
        else:
            floor = statistics.median(floors)
            row |= {"sampling_floor_model_steps_per_s": floor, "sampling_share": r / floor}
        rows.append(row)
    for R in fused:
        f = statistics.median(rates[("fused", R)])
        eager = next(row["model_steps_per_s"] for row in rows if row["impl"] == "engine" and row["R"] == R)
        rows.append({"impl": "engine, fused backend", "R": R, "model_steps_per_s": f, "ratio": f / ref_rate,
                     "vs_eager": f / eager, "step_per_core": statistics.median(rates[("fused1", R)]),
                     "rng_per_core": statistics.median(rates[("rng", R)])})
    return rows


def _fused_normals_rate(tr: EnsembleTrainer, seconds: float) -> float:
    """Model-steps/s of the fused step's random numbers alone on one core: every work item of one
    model's batch drawn as its kernel draws it (Philox-seeded xoshiro128++ lanes, Box-Muller)."""
    from ..engine import fused_kernels as K
    from ..engine.fused_random import normals

    prog = tr.stepper.program
    rows = prog.model.D * (prog.L + 1) + prog.N * prog.d
    keys = prog.keys[0]

    def one_model_step():
        for c in range(prog.n_chunks):
            normals(keys[0], keys[1], 0, c, rows)

    return _rate(one_model_step, seconds, lambda: None)


def _print_cpu(rows: list[dict]) -> None:
    print(f"{'implementation':34s} {'R':>4s} {'model-steps/s':>14s} {'vs reference':>13s} {'vs eager':>9s} "
          f"{'target':>22s}")
    for row in rows:
        target, vs = "-", "-"
        if row["impl"] == "engine" and row["R"] in CPU_TARGETS:
            unit, value = CPU_TARGETS[row["R"]]
            got = row["model_steps_per_s"] if unit == "model-steps/s" else row["ratio"]
            target = f"{'met' if got >= value else 'not met'}: >= {value:,g}{'x' if unit != 'model-steps/s' else ''}"
        if "vs_eager" in row:
            vs = f"{row['vs_eager']:.2f}x"
            if row["R"] in FUSED_TARGETS:
                value = FUSED_TARGETS[row["R"]]
                target = f"{'met' if row['vs_eager'] >= value else 'not met'}: >= {value:g}x eager"
        print(f"{row['impl']:34s} {row['R']:4d} {row['model_steps_per_s']:14.1f} {row['ratio']:12.1f}x {vs:>9s} "
              f"{target:>22s}")
    print("per-core floors, model-steps/s on one core (single-threaded, same windows):")
    print(f"{'R':>4s} {'normal_ alone':>14s} {'sampler':>10s} {'fwd+bwd+Adam':>13s} {'ceiling':>10s} {'engine/ceiling':>15s}")
    for row in rows:
        if "ceiling" in row:
            print(f"{row['R']:4d} {row['normals_per_core']:14.0f} {row['sampler_per_core']:10.0f} "
                  f"{row['compute_per_core']:13.0f} {row['ceiling']:10.0f} {row['model_steps_per_s'] / row['ceiling']:14.0%}")
    print("ceiling: sampler and compute on every core at once, spread perfectly (R = 1: the batch drawn in a "
          "second thread, so the slower of the two)")
    fused = [row for row in rows if "vs_eager" in row]
    if fused:
        print("fused backend, model-steps/s on one core (same windows):")
        print(f"{'R':>4s} {'random numbers':>15s} {'whole step':>11s} {'all cores / one core':>21s}")
        for row in fused:
            print(f"{row['R']:4d} {row['rng_per_core']:15.0f} {row['step_per_core']:11.0f} "
                  f"{row['model_steps_per_s'] / row['step_per_core']:20.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="benchmark the training engine against a plain reference")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--ensembles", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each timed window")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                    help="torch.compile the loss (auto: on CUDA only)")
    ap.add_argument("--graph", choices=["on", "off"], default="off", help="capture each step as a CUDA graph (cuda only)")
    ap.add_argument("--draw-ahead", default="auto", help="steps whose batches are drawn at once (auto: 1 on cpu, 32 on cuda)")
    args = ap.parse_args(argv)
    compile_flag = {"auto": "auto", "on": True, "off": False}[args.compile]

    try:
        dev = resolve_device(args.device)
        draw = resolve_draw_ahead(args.draw_ahead, dev)
        check_float("seconds", args.seconds, 0.0, 3600.0, lo_open=True)
        check_int("repeats", args.repeats, 1, 1000)
        for R in args.ensembles:
            check_int("ensembles", R, 1, 4096)
    except ValueError as err:
        print(f"python -m icl_lib.tools.bench: error: {err}", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else (platform.processor() or platform.machine())
    print(f"device={dev.type} ({name}), torch {torch.__version__}, threads={torch.get_num_threads()}, "
          f"H=4 d=5 L=40 batch=256, Adam, cuda graph {args.graph}, draw-ahead {args.draw_ahead}")
    if dev.type == "cpu":
        why = fused_unavailable()
        print(f"cpu: {cpu_description()}" + (f"; no fused backend here ({why})" if why else ""))
    rows = measure(dev.type, args.ensembles, args.seconds, args.repeats, compile=compile_flag,
                   graph=args.graph == "on", draw_ahead=draw)
    if dev.type == "cpu":
        _print_cpu(rows)
        return 0
    print(f"{'implementation':34s} {'R':>4s} {'model-steps/s':>14s} {'vs reference':>13s} {'sampling share':>15s}")
    for row in rows:
        share = f"{row['sampling_share']:.0%}" if "sampling_share" in row else "-"
        print(f"{row['impl']:34s} {row['R']:4d} {row['model_steps_per_s']:14.1f} {row['ratio']:12.1f}x {share:>15s}")
    print("sampling share: time spent drawing the fresh Gaussian batch / time of a whole training step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
