"""The book's execution cache stays the record of *this* code's chapters (``make book``).

Jupyter Book (MyST-NB, ``execute_notebooks: cache``) matches a chapter with its cached execution
by the chapter's code cells only: after a change to ``icl_lib`` the cache would go on serving the
old code's outputs.  So the cache records the :func:`execution_fingerprint` of the code that
filled it -- every source file of ``icl_lib``, the versions of Python and of the libraries the
chapters compute with, and the settings that choose what a chapter computes (the profile variables
of the build and the run store's manifest, :func:`execution_settings`: a chapter executed in the
quick profile is never served to a paper build, nor one executed before runs were stored) -- and
:func:`clear_if_stale` empties it when the fingerprint differs: every chapter is then executed
again (``make book``'s pre-execution, :mod:`icl_lib.book.execute`, and the build itself both
call it).  The book's Sphinx extension re-reads a chapter page whose
execution is newer than the page (:func:`needs_reading`), so a re-executed chapter is never
rendered from an old page either.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import icl_lib

__all__ = ["execution_fingerprint", "execution_settings", "clear_if_stale", "needs_reading", "FINGERPRINT_FILE"]

FINGERPRINT_FILE = "icl_fingerprint.json"  # in the cache folder: the fingerprint of its executions
_PACKAGES = ("torch", "numba", "numpy", "scipy", "pandas", "matplotlib", "seaborn")


# environment variables that change what a chapter computes (icl_lib.engine.profiles, make book)
PROFILE_VARIABLES = ("ICL_PROFILE", "ICL_BOOK_PROFILE", "ICL_CUDA_GRAPH", "ICL_BACKEND")


def execution_settings() -> dict:
    """The settings, besides code, that choose a chapter's outputs: :data:`PROFILE_VARIABLES` as set
    in this environment, and a digest of the run store's ``manifest.json`` (the stored runs a paper
    chapter evaluates; ``None`` without a store)."""
    from ..engine.store import store_dir

    manifest = store_dir() / "manifest.json"
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()[:16] if manifest.is_file() else None
    return {name: os.environ.get(name, "") for name in PROFILE_VARIABLES} | {"store": digest}


def execution_fingerprint(sources: list[Path] | None = None, settings: dict | None = None) -> str:
    """A hash of everything a chapter's outputs depend on besides its own code cells: the source
    files of ``sources`` (default: the ``icl_lib`` package), the versions of Python and of the
    numerical libraries, and ``settings`` (default: :func:`execution_settings`)."""
    roots = [Path(icl_lib.__file__).resolve().parent] if sources is None else [Path(p) for p in sources]
    h = hashlib.sha256()
    for root in roots:
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            h.update(f"{f.relative_to(root.parent)}\0".encode() + f.read_bytes() + b"\0")
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    h.update(json.dumps(versions, sort_keys=True).encode())
    h.update(json.dumps(execution_settings() if settings is None else settings, sort_keys=True).encode())
    return h.hexdigest()[:24]


def clear_if_stale(cache_path: str | Path, fingerprint: str | None = None) -> bool:
    """Empty the Jupyter Cache at ``cache_path`` unless it was filled under ``fingerprint``
    (default: :func:`execution_fingerprint`), then record it; ``True`` when executions were dropped."""
    from jupyter_cache import get_cache

    cache_path = Path(cache_path)
    fingerprint = execution_fingerprint() if fingerprint is None else fingerprint
    stamp = cache_path / FINGERPRINT_FILE
    try:
        recorded = json.loads(stamp.read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded == fingerprint:
        return False
    dropped = False
    if cache_path.exists():
        cache = get_cache(str(cache_path))
        dropped = bool(cache.list_cache_records())
        cache.clear_cache()
    cache_path.mkdir(parents=True, exist_ok=True)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    stamp.write_text(json.dumps({"fingerprint": fingerprint, "since": when}) + "\n")
    return dropped


def needs_reading(cache_path: str | Path, notebook: str | Path, read_at_us: int) -> bool:
    """Whether a chapter page read at ``read_at_us`` (microseconds since the epoch, Sphinx's
    ``env.all_docs``) must be read again: its notebook has no cached execution (it will be
    executed) or one created after the page was read."""
    import nbformat
    from jupyter_cache import get_cache

    try:
        record = get_cache(str(cache_path)).match_cache_notebook(nbformat.read(str(notebook), as_version=4))
    except KeyError:
        return True
    created = record.created if record.created.tzinfo else record.created.replace(tzinfo=timezone.utc)
    return int(created.timestamp() * 1_000_000) > read_at_us
