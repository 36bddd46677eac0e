"""Command line: train an ensemble of attention models (paper 1's setup) and report its speed.

    python -m icl_lib train --heads 4 --d 5 --L 40 --sigma2 0.1 --steps 2000 --batch 256 \\
        --lr 1e-3 --seed 0 --ensemble 8 --device auto [--out runs.pt] [--draw-ahead K] [--cuda-graph]

Trains ``--ensemble`` models with seeds ``seed, seed+1, ...`` side by side, shows a progress bar,
and prints last one line ``steps_per_s=... model_steps_per_s=... final_loss=...`` (final loss: mean
validation loss of the ensemble).  With ``--out`` the runs are saved atomically to that file (whose
folder is checked for writing before training starts) and a checkpoint next to it (``<out>.ckpt``,
every ``--checkpoint-every`` seconds and on Ctrl-C) lets an interrupted run resume where it stopped:
run the same command again.
``--draw-ahead`` draws the batches of that many steps at once (default: 1 on a CPU, 32 on a GPU);
``--cuda-graph`` replays each step as a CUDA graph (GPU only).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..engine.atomic import WriteFailed
from ..engine.steps import TrainingDiverged
from ..engine.trainer import EnsembleTrainer
from ..validate import check_choice, check_float, check_int

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m icl_lib", description="icl_lib command line")
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train an ensemble of H-head attention models on in-context regression")
    t.add_argument("--heads", type=int, default=4, help="heads H per model (default 4)")
    t.add_argument("--d", type=int, default=5, help="covariate dimension (default 5)")
    t.add_argument("--L", type=int, default=40, help="context length (default 40)")
    t.add_argument("--sigma2", type=float, default=0.1, help="label-noise variance (default 0.1)")
    t.add_argument("--steps", type=int, default=2000, help="optimiser steps (default 2000)")
    t.add_argument("--batch", type=int, default=256, help="fresh sequences per step (default 256)")
    t.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    t.add_argument("--seed", type=int, default=0, help="seed of the first model (default 0)")
    t.add_argument("--ensemble", type=int, default=1, help="models trained side by side (default 1)")
    t.add_argument("--device", default="auto", help="cpu, cuda or auto (default auto)")
    t.add_argument("--out", type=Path, default=None, help="save the trained runs to this file (checked before training)")
    t.add_argument("--checkpoint-every", type=float, default=60.0,
                   help="seconds between checkpoints next to --out (default 60)")
    t.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    t.add_argument("--draw-ahead", default="auto", help="steps whose batches are drawn at once (default auto: 1 on cpu, 32 on cuda)")
    t.add_argument("--cuda-graph", action="store_true", help="capture each training step as a CUDA graph (cuda only)")
    t.add_argument("--backend", default="auto", help="on a CPU: fused (one compiled loop per group of sequences) or eager (PyTorch ops); default auto: fused on a cpu, eager on cuda")
    for name, text in (("plan", "print the runs every chapter trains, their ensembles and the time expected here"),
                       ("train-plan", "train every run of the book's plan into the run cache")):
        q = sub.add_parser(name, help=text)
        q.add_argument("--profile", default="quick", help="quick, paper or auto (default quick)")
        q.add_argument("--device", default="auto", help="cpu, cuda or auto (default auto)")
        q.add_argument("--book", type=Path, default=None, help="the folder of the chapters (default: book/)")
        q.add_argument("--chapters", default=None, help="only these chapters, comma-separated (e.g. 02,05; default all)")
        q.add_argument("--backend", default="auto", help="on a CPU: fused (one compiled loop per group of sequences) or eager (PyTorch ops); default auto: fused on a cpu, eager on cuda")
        if name == "plan":
            q.add_argument("--measure", action="store_true",
                           help="time a few steps of every ensemble here (default: the cost model, at once)")
            q.add_argument("--no-measure", action="store_true", help="the cost model (the default)")
        else:
            q.add_argument("--checkpoint-every", type=float, default=60.0, help="seconds between checkpoints")
            q.add_argument("--no-progress", action="store_true", help="hide the progress bar")
            q.add_argument("--executor", default="local", help="local (default) or dask")
            q.add_argument("--scheduler", default=None,
                           help="with --executor dask: the scheduler's address (tcp://HOST:8786); default: a local cluster")
            q.add_argument("--workers", type=int, default=2, help="worker processes of the local Dask cluster (default 2)")
    q = sub.add_parser("store", help="the run store of the paper profile: status, or export the trained plan into it")
    q.add_argument("action", choices=["status", "export"])
    q.add_argument("--profile", default="paper", help="the plan's profile (default paper)")
    q.add_argument("--device", default="auto", help="cpu, cuda or auto (default auto)")
    q.add_argument("--chapters", default=None, help="only these chapters, comma-separated (e.g. 02,05; default all)")
    q.add_argument("--early-step", type=int, default=None, help="the early checkpoint's step (default 2000)")
    q.add_argument("--backend", default="auto", help="on a CPU: fused (one compiled loop per group of sequences) or eager (PyTorch ops); default auto: fused on a cpu, eager on cuda")
    q.add_argument("--max-ensemble", type=int, default=64,
                   help="models per ensemble (default 64); each ensemble is stored as soon as it ends")
    q.add_argument("--checkpoint-every", type=float, default=60.0,
                   help="seconds between checkpoints, written to the store's ckpt/ folder (default 60)")
    q.add_argument("--processes", type=int, default=None,
                   help="on a CPU, worker processes training one single-threaded ensemble each (default: one per "
                        "CPU thread; 1: the ensembles train in this process)")
    q.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    q = sub.add_parser("record", help="the committed records of every chapter's paper profile (its claims; chapter "
                                      "8's executed notebook too): status, or run chapters and commit their records")
    q.add_argument("action", choices=["status", "run"])
    q.add_argument("chapter", nargs="?", default=None,
                   help="with run: the chapter (e.g. 08), several (02,03) or all")
    return ap


def _store(args) -> int:
    from ..book import plan as book
    from ..book.plan_training import EARLY_STEP, store_plan, store_summary

    plan = book.select_chapters(book.book_plan(args.profile), args.chapters)
    store = book.RunStore()
    if args.action == "status":
        st = store.status(book.unique_specs(plan))
        print(f"run store {st['root']}: {st['stored']} of {st['planned']} runs of the {args.profile} plan stored"
              f"{' (complete)' if st['complete'] else ''}; {len(st['stale'])} stale entries (other model code)")
        # the profile CI's published book builds each chapter in (ICL_BOOK_PROFILE=stored)
        published = book.published_profiles(list(plan), store=store) if args.profile == "paper" else {}
        for chapter, text in store_summary(plan, store).items():
            print(f"  {chapter:24s} {text}" + (f"; published in {published[chapter]}" if published else ""))
        _print_checkpoints(store, args.device, args.backend)
        return 0
    early = check_int("early_step", args.early_step if args.early_step is not None else EARLY_STEP, 1)
    max_ensemble = check_int("max_ensemble", args.max_ensemble, 1)
    every = check_float("checkpoint_every", args.checkpoint_every, 0.0, 86_400.0, lo_open=True)
    processes = check_int("processes", args.processes if args.processes is not None else torch.get_num_threads(), 1, 256)
    command = "python -m icl_lib " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        st = store_plan(plan, early, args.device, store, command, progress=not args.no_progress,
                        max_ensemble=max_ensemble, checkpoint_every=every, processes=processes,
                        backend=args.backend)
    except KeyboardInterrupt:
        print(f"python -m icl_lib store export: interrupted: the finished ensembles are in the store, those in "
              f"training saved a checkpoint in {store.checkpoint_dir}; run the same command again to resume",
              file=sys.stderr)
        return 130
    print(f"run store {st['root']}: {st['stored']} of {st['planned']} runs stored")
    return 0


def _print_checkpoints(store, device: str, backend: str = "auto") -> None:
    """One line per ensemble ``store export`` left in training in the store's ``ckpt/``."""
    from ..engine.execution import Execution

    ex = Execution.resolve(device, backend=backend)
    for c in store.checkpoints(ex.device.type, ex.draw_ahead, ex.backend):
        if "invalid" in c:
            print(f"  in training: {c['file']} does not load ({c['invalid']}); not resumed")
            continue
        where = "resumable here" if c["resumable"] else f"not resumable on {ex.device.type}"
        if not c["current"]:
            where = "written by other model code: not resumed"
        print(f"  in training: {c['runs']} runs at step {c['step']:,} of {c['steps']:,} "
              f"({100 * c['step'] / c['steps']:.1f}%, {c['seconds'] / 60:.0f} min so far; {where}) in ckpt/{c['file']}")


def _plan(args) -> int:
    from ..book import plan as book  # the plan reads the chapters: only for these commands
    from ..book.plan_cost import describe
    from ..book.plan_training import train_plan

    plan = book.select_chapters(book.book_plan(args.profile, args.book or book.BOOK), args.chapters)
    if args.command == "plan":
        print(describe(plan, args.device, measure=args.measure and not args.no_measure, backend=args.backend))
        return 0
    every = check_float("checkpoint_every", args.checkpoint_every, 0.0, 86_400.0, lo_open=True)
    print(describe(plan, args.device, measure=False, backend=args.backend))
    t0 = time.perf_counter()
    try:
        check_choice("executor", args.executor, ("local", "dask"))
        train_plan(plan, args.device, progress=not args.no_progress, checkpoint_every=every,
                   executor=args.executor, scheduler=args.scheduler, workers=args.workers, backend=args.backend)
    except KeyboardInterrupt:
        print("python -m icl_lib train-plan: interrupted: every ensemble in training saved a checkpoint in the run "
              "cache; run the same command again to resume", file=sys.stderr)
        return 130
    n = len(book.unique_specs(plan))
    print(f"train-plan: the {n} runs of the plan are in the run cache ({time.perf_counter() - t0:.0f} s)")
    return 0


def check_out(out: Path) -> None:
    """Fail before any training if the runs could not be written to ``out``: it must not be a
    folder, no part of its folder may be a file, and the folder must accept a new file."""
    if out.is_dir():
        raise ValueError(f"out='{out}' is invalid: accepted a file path (it is a folder)")
    existing = next(p for p in [out.parent, *out.parent.parents] if p.exists())
    if not existing.is_dir():
        raise ValueError(f"out='{out}' is invalid: accepted a path in a folder ({existing} is a file)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(f"out='{out}' is invalid: accepted a writable folder ({err.strerror})") from None


def _save(runs, out: Path) -> None:
    """Write the runs atomically (temporary file, then rename; no temporary file is left behind)."""
    payload = [{"spec": r.spec.to_dict(), "params": r.params, "history": r.history, "meta": r.meta} for r in runs]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        torch.save(payload, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def _train(args) -> int:
    R = check_int("ensemble", args.ensemble, 1, 4096)
    every = check_float("checkpoint_every", args.checkpoint_every, 0.0, 86_400.0, lo_open=True)
    tc = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, n_log=20, val_size=2048)
    specs = [
        RunSpec(
            data=DataConfig(d=args.d, L=args.L, sigma2=args.sigma2),
            model=ModelConfig(heads=args.heads),
            train=tc,
            seed=check_int("seed", args.seed, 0) + r,
        )
        for r in range(R)
    ]
    ckpt = None
    if args.out is not None:
        check_out(args.out)
        ckpt = args.out.with_name(args.out.name + ".ckpt")
    trainer = EnsembleTrainer(
        specs, args.device, checkpoint=ckpt, checkpoint_every=every, progress=not args.no_progress,
        draw_ahead=args.draw_ahead, graph=args.cuda_graph, backend=args.backend,
    )
    start_step = trainer.step
    t0 = time.perf_counter()
    try:
        runs = trainer.run()
    except KeyboardInterrupt:
        if ckpt is not None:
            what = f"checkpoint saved at step {trainer.step} in {ckpt}; run the same command again to resume"
        else:
            what = f"stopped at step {trainer.step}, nothing saved (with --out FILE a checkpoint lets it resume)"
        print(f"python -m icl_lib train: interrupted: {what}", file=sys.stderr)
        return 130
    seconds = time.perf_counter() - t0
    done = args.steps - start_step
    if args.out is not None:
        _save(runs, args.out)
        ckpt.unlink(missing_ok=True)
    final = sum(r.val_loss for r in runs) / len(runs)
    sps = done / max(seconds, 1e-9)
    print(f"steps_per_s={sps:.2f} model_steps_per_s={sps * R:.2f} final_loss={final:.6f}")
    return 0


def _dispatch(args) -> int:
    if args.command == "train":
        return _train(args)
    if args.command in ("plan", "train-plan"):
        return _plan(args)
    if args.command == "store":
        return _store(args)
    if args.command == "record":
        from ..book.records import main_record

        return main_record(args.action, args.chapter)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe is noticed here, not at interpreter exit
        return code
    except BrokenPipeError:  # the reader of our output left (`| head -1`, `| grep -q`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ValueError as err:  # invalid parameter: the library's message names it
        print(f"python -m icl_lib {args.command}: error: {err}", file=sys.stderr)
        return 2
    except (TrainingDiverged, WriteFailed) as err:  # WriteFailed: a file (of the run store) not written
        print(f"python -m icl_lib {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
