"""The run cache: trained runs stored by a hash of their full configuration.

A run's key (:meth:`icl_lib.config.RunSpec.key`) hashes its :class:`RunSpec`, the device type and
``MODEL_CODE_VERSION``; chapters, ``nbval`` and the book build asking for the same run share it.
Entries are written atomically (temporary file, then rename: :mod:`icl_lib.engine.atomic`) with a
checksum of their contents, and loaded with ``torch.load(weights_only=True)``.  Every entry is verified when it is loaded: it
must unpickle, carry a valid checksum, hold the spec whose key it is stored under, and have finite
parameters of the spec's shapes.  A file that fails (truncated, empty, foreign, another run's,
corrupted) is moved aside to ``corrupt/`` with one warning line naming it, and the run is trained
again -- a cache entry is never served unverified.  Training takes an exclusive file lock per run
key (in sorted order, so two processes never deadlock): when two processes want the same run, one
trains it and the other waits, then loads it.  An ensemble in progress checkpoints into ``ckpt/``
and resumes from there after an interruption.  A write that fails (a full disk) leaves no
temporary file and raises one :class:`~icl_lib.engine.atomic.WriteFailed` naming the file; the
temporary files of a process killed while writing are removed when the cache is next opened.

The folder is ``$ICL_CACHE_DIR`` when set, else ``_build/icl_cache`` in the project checkout, else
``~/.cache/icl_lib``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import time
from pathlib import Path
from typing import Iterator, Sequence

import torch

from ..config import RunSpec
from .atomic import remove_stale_temporaries, write_atomic
from .run import Run, meta_key

__all__ = ["RunCache", "cache_dir", "checkpoint_name", "CorruptEntry", "payload_checksum"]

log = logging.getLogger(__name__)
FORMAT = 2  # entries written since the checksum; older files are rejected and retrained


class CorruptEntry(ValueError):
    """A file under the run cache that is not a valid entry for its key (the message says why)."""


def payload_checksum(payload: dict) -> str:
    """SHA-256 of an entry's spec, metadata and every tensor's dtype, shape and bytes, in a fixed order."""
    h = hashlib.sha256()
    h.update(payload["spec"].encode())
    h.update(json.dumps(payload["meta"], sort_keys=True).encode())
    for part in ("params", "history"):
        for name in sorted(payload[part]):
            t = payload[part][name].detach().cpu().contiguous()
            h.update(f"{part}/{name}/{t.dtype}/{tuple(t.shape)}".encode())
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def checkpoint_name(keys: Sequence[str]) -> str:
    """The file name of the checkpoint of an ensemble of run-cache ``keys`` (in any order)."""
    return hashlib.sha256("|".join(sorted(keys)).encode()).hexdigest()[:24] + ".pt"


def cache_dir() -> Path:
    """``$ICL_CACHE_DIR``, else ``<project>/_build/icl_cache`` for a source checkout, else ``~/.cache/icl_lib``."""
    env = os.environ.get("ICL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    project = Path(__file__).resolve().parents[2]
    if (project / "pyproject.toml").exists() and os.access(project, os.W_OK):
        return project / "_build" / "icl_cache"
    return Path.home() / ".cache" / "icl_lib"


class RunCache:
    """Trained runs on disk, one file per run key."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else cache_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, self.root / "ckpt"):  # what writers killed mid-write left
            remove_stale_temporaries(folder)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.pt"

    def checkpoint_path(self, keys: Sequence[str], folder: str | os.PathLike | None = None) -> Path:
        """The checkpoint of the ensemble of run ``keys`` in progress: in ``folder`` (the run
        store's ``ckpt/`` for ``store export``), else in this cache's ``ckpt/``."""
        return (Path(folder) if folder is not None else self.root / "ckpt") / checkpoint_name(keys)

    def load(self, key: str) -> Run | None:
        """The cached :class:`~icl_lib.engine.run.Run` for ``key``, or ``None`` (none, or a bad file,
        which is moved aside with a warning: see the module docstring)."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            return self._verified(key, p)
        except Exception as err:  # noqa: BLE001 - whatever is wrong with the file, it is not served
            self._set_aside(p, err)
            return None

    def _verified(self, key: str, p: Path) -> Run:
        """The run stored at ``p`` if it is a valid entry for ``key``; raises otherwise."""
        payload = torch.load(p, map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise CorruptEntry("not a run-cache entry of this library version")
        if payload.get("checksum") != payload_checksum(payload):
            raise CorruptEntry("its checksum does not match its contents")
        raw = json.loads(payload["spec"])
        spec = RunSpec.from_dict(raw)
        meta = payload["meta"]
        if meta_key(spec, meta) != key:
            raise CorruptEntry(f"it holds another run (seed={spec.seed}, heads={spec.model.heads}) than its key")
        H, D, N = spec.model.heads, spec.data.D, spec.data.n_tasks
        shapes = {"Q": (H, D, D), "K": (H, D, D), "V": (H, D, D), "O": (H, N, D)}
        for name, shape in shapes.items():
            t = payload["params"][name]
            if tuple(t.shape) != shape:
                raise CorruptEntry(f"parameter {name} has shape {tuple(t.shape)}, not {shape}")
            if not bool(torch.isfinite(t).all()):
                raise CorruptEntry(f"parameter {name} is not finite")
        return Run(spec=spec, params=payload["params"], history=payload["history"], meta=dict(meta, cached=True))

    def _set_aside(self, p: Path, err: Exception) -> None:
        """Move a bad entry to ``corrupt/`` (never overwritten) and say so in one line."""
        aside = self.root / "corrupt"
        aside.mkdir(parents=True, exist_ok=True)
        dest = aside / f"{p.stem}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}.pt"
        try:
            os.replace(p, dest)
        except OSError:  # e.g. a read-only cache: leave the file, still never serve it
            dest = None
        why = f"{type(err).__name__}: {err}".splitlines()[0][:200]
        where = f"moved to {dest}" if dest is not None else "left in place (could not move it)"
        log.warning("icl_lib run cache: %s is not a valid entry (%s); %s, the run is trained again", p, why, where)

    def save(self, key: str, run) -> Path:
        """Store ``run`` atomically under ``key``; a write that fails (a full disk) leaves nothing
        behind and raises :class:`~icl_lib.engine.atomic.WriteFailed` (:func:`icl_lib.train` then
        returns the run uncached, with a warning)."""
        payload = {
            "format": FORMAT,
            "spec": json.dumps(run.spec.to_dict(), sort_keys=True),
            "params": run.params,
            "history": run.history,
            "meta": {k: v for k, v in run.meta.items() if k != "cached"},
        }
        payload["checksum"] = payload_checksum(payload)
        buf = io.BytesIO()
        torch.save(payload, buf)
        return write_atomic(self.path(key), buf.getvalue(), "run cache entry")

    @contextlib.contextmanager
    def locked(self, keys: Sequence[str]) -> Iterator[None]:
        """Hold exclusive locks on ``keys`` (taken in sorted order) for the duration of the block."""
        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        handles = []
        try:
            for key in sorted(set(keys)):
                fh = open(lock_dir / f"{key}.lock", "a+")
                fcntl.flock(fh, fcntl.LOCK_EX)
                handles.append(fh)
            yield
        finally:
            for fh in reversed(handles):
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
