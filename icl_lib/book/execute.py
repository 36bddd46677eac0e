"""Execute the book's chapters side by side before ``jupyter-book build`` (``make book``).

    python -m icl_lib.book.execute [--cache _build/.jupyter_cache] [--jobs N] CHAPTER.ipynb ...

Jupyter Book (MyST-NB, ``execute_notebooks: cache``) executes chapters one at a time and keeps each
executed notebook in a Jupyter Cache.  This fills that cache first, ``--jobs`` chapters at a time,
each kernel single-threaded (``OMP_NUM_THREADS=1``), so the cores are busy even while a chapter
runs serial code; the build then finds every chapter cached and only renders.  A chapter's numbers
do not change: the CPU training engine runs its shards single-threaded anyway
(:mod:`icl_lib.engine.steps`), and chapters share trained runs through the run cache, whose file locks let
one chapter wait for runs another is training.

With ``ICL_BOOK_PROFILE=stored`` (CI's published book) each chapter's kernel gets its own
``ICL_PROFILE``: ``paper`` where the run store holds every run of the chapter's paper plan, so
nothing trains, ``quick`` otherwise (:func:`chapter_profiles`).  Unset, every kernel inherits
``ICL_PROFILE``.

Chapters start in the order given (``make book`` starts the long ones first, and chapter 2 before
the chapters that reuse its runs).  A chapter whose source did not change since its last execution
is skipped, unless ``icl_lib`` (or the libraries it computes with) changed since then: the cache
is then emptied and every chapter executes again (:mod:`icl_lib.book.execution_cache`).  A chapter that fails is reported and left to the build, which executes it again and
shows the error.  The execution mirrors MyST-NB's (kernel in the notebook's folder, the
``execution`` timeout, errors not allowed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .execution_cache import clear_if_stale

__all__ = ["main", "execute_chapters"]


BOOK_PROFILES = ("stored",)  # accepted values of ICL_BOOK_PROFILE (unset: every chapter in ICL_PROFILE)


def book_profile() -> str:
    """``ICL_BOOK_PROFILE`` of this environment (``""`` when unset), checked against :data:`BOOK_PROFILES`."""
    mode = os.environ.get("ICL_BOOK_PROFILE", "")
    if mode and mode not in BOOK_PROFILES:
        raise ValueError(f"ICL_BOOK_PROFILE={mode!r} is invalid: accepted {', '.join(BOOK_PROFILES)} or unset")
    return mode


def chapter_profiles(paths: list[str]) -> dict[str, str | None]:
    """Per chapter path, the ``ICL_PROFILE`` its kernel gets: with ``ICL_BOOK_PROFILE=stored``, the
    profile of :func:`icl_lib.book.plan.published_profiles` (paper where the run store holds the
    chapter's runs, quick otherwise); unset, ``None`` (the kernel inherits ``ICL_PROFILE``)."""
    if not book_profile():
        return {p: None for p in paths}
    from .plan import published_profiles

    by_name = published_profiles([Path(p).stem for p in paths], Path(paths[0]).resolve().parent)
    return {p: by_name[Path(p).stem] for p in paths}


def _warn_paper_training(profiles: dict[str, str | None]) -> None:
    """Say before any work when the chapters executed in the paper profile will train runs that
    neither the run cache nor the run store holds (500,000 steps each: hours on a CPU)."""
    from ..engine.profiles import resolve_profile
    from .plan import book_plan
    from .plan_cost import missing_runs

    paper = [p for p, v in profiles.items() if (v or resolve_profile("auto", "auto")) == "paper"]
    if not paper:
        return
    plan = book_plan("paper", Path(paper[0]).parent)
    names = [Path(p).stem for p in paper]
    todo = missing_runs({n: plan[n] for n in names if n in plan})
    if todo:
        steps = sum(s.train.steps for s in todo)
        print(f"bookexec: the paper profile of these chapters trains {len(todo)} runs ({steps:,} model-steps) that "
              "neither the run cache nor the run store holds: hours on a CPU (`python -m icl_lib plan --profile "
              "paper` projects the time; the run store holds runs trained once on a GPU)")


def _execute(path: str, timeout: int, profile: str | None = None) -> tuple[str, object, float, str | None]:
    """Run one notebook in a fresh kernel (with ``ICL_PROFILE=profile`` when one is given); returns
    ``(path, executed notebook, seconds, error)``."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    if profile is not None:
        os.environ["ICL_PROFILE"] = profile  # this worker process's environment: the kernel inherits it

    nb = nbformat.read(path, as_version=4)
    result = single_nb_execution(nb, cwd=str(Path(path).parent.resolve()), timeout=timeout, allow_errors=False)
    err = None if result.err is None else f"{type(result.err).__name__}: {str(result.err).strip().splitlines()[-1:]}"
    return path, nb, result.time, err


def _serve_record(cache, path: str, profile: str | None) -> bool:
    """Cache the committed record's executed notebook of chapter ``path`` instead of executing it,
    where the chapter has a current record of the profile it runs in (:func:`icl_lib.book.records.served`:
    chapter 8's paper profile, half an hour here); returns whether it did."""
    from jupyter_cache.cache.main import CacheBundleIn

    from ..engine.profiles import resolve_profile
    from .records import served

    found = served(path, profile or resolve_profile("auto", "auto"))
    if found is None:
        return False
    nb, seconds = found
    cache.cache_notebook_bundle(CacheBundleIn(nb, path, data={"execution_seconds": seconds, "recorded": True}),
                                check_validity=False, overwrite=True)
    print(f"  {Path(path).name:45s} served from its committed record ({seconds:.0f} s when recorded; "
          "python -m icl_lib record status)")
    return True


def _read_timeout(config: Path) -> int:
    """The ``execute.timeout`` of ``_config.yml`` (Jupyter Book's default 30 s when absent)."""
    try:
        import yaml

        return int(((yaml.safe_load(config.read_text()) or {}).get("execute") or {}).get("timeout", 30))
    except (OSError, ValueError, TypeError):
        return 30


def execute_chapters(
    paths: list[str], cache_path: Path, jobs: int, timeout: int, fingerprint: str | None = None
) -> int:
    """Execute the chapters missing from the Jupyter Cache at ``cache_path``; returns the failures.

    The cache is emptied first when it was filled by other code (another ``fingerprint``, by default
    :func:`icl_lib.book.execution_cache.execution_fingerprint`): then every chapter executes again."""
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.cache.main import CacheBundleIn

    if clear_if_stale(cache_path, fingerprint):
        print("bookexec: icl_lib or the libraries it computes with changed since the cached executions: "
              "executing every chapter again")
    cache = get_cache(str(cache_path))
    todo = []
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        try:
            cache.match_cache_notebook(nb)
            continue  # executed before with this source
        except KeyError:
            todo.append(str(Path(p).resolve()))
    if not todo:
        print("bookexec: every chapter is cached")
        return 0
    profiles = chapter_profiles(todo)
    todo = [p for p in todo if not _serve_record(cache, p, profiles[p])]
    if not todo:
        return 0
    # Kernels inherit this environment: one thread each, no progress bars (as in the book build).
    os.environ.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ICL_PROGRESS": "0"})
    jobs = max(1, min(jobs, len(todo)))
    print(f"bookexec: executing {len(todo)} chapter(s), {jobs} at a time, one thread each")
    if any(v is not None for v in profiles.values()):
        print("bookexec: profiles (paper where the run store holds a chapter's runs): "
              + ", ".join(f"{Path(p).stem.split('_')[0]} {v}" for p, v in profiles.items()))
    _warn_paper_training(profiles)
    failures = 0
    t0 = time.perf_counter()
    busy = 0.0
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(_execute, p, timeout, profiles[p]) for p in todo]
        for f in as_completed(futures):
            path, nb, seconds, err = f.result()
            busy += seconds
            name = Path(path).name
            if err is not None:
                failures += 1
                print(f"  {name:45s} FAILED after {seconds:6.1f} s ({err}); the build re-runs it and shows the error")
                continue
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, path, data={"execution_seconds": seconds}), check_validity=False, overwrite=True
            )
            print(f"  {name:45s} {seconds:6.1f} s")
    wall = time.perf_counter() - t0
    print(f"bookexec: {wall:.1f} s wall for {busy:.1f} s of chapter execution ({jobs} kernels)")
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapters", nargs="+", help="notebooks, in the order to start them")
    ap.add_argument("--cache", type=Path, default=Path("_build/.jupyter_cache"), help="the build's Jupyter Cache")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="chapters executed at once")
    ap.add_argument("--config", type=Path, default=Path("_config.yml"), help="for execute.timeout")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs={args.jobs} is invalid: accepted an integer >= 1")
    for p in args.chapters:
        if not Path(p).is_file() or not p.endswith(".ipynb"):
            ap.error(f"chapter {p!r} is invalid: accepted an existing .ipynb file")
    try:
        book_profile()
    except ValueError as err:
        ap.error(str(err))
    execute_chapters(args.chapters, args.cache, args.jobs, _read_timeout(args.config))
    return 0  # failures are left to the build, which reports them


if __name__ == "__main__":
    sys.exit(main())
