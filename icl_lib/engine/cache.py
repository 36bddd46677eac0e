"""The run cache: trained runs stored by a hash of their full configuration.

A run's key (:meth:`icl_lib.config.RunSpec.key`) hashes its :class:`RunSpec`, the device type and
``MODEL_CODE_VERSION``; chapters, ``nbval`` and the book build asking for the same run share it.
Entries are written atomically (temporary file, then rename) and loaded with
``torch.load(weights_only=True)``.  Training takes an exclusive file lock per run key (in sorted
order, so two processes never deadlock): when two processes want the same run, one trains it and
the other waits, then loads it.  An ensemble in progress checkpoints into ``ckpt/`` and resumes from
there after an interruption.

The folder is ``$ICL_CACHE_DIR`` when set, else ``_build/icl_cache`` in the project checkout, else
``~/.cache/icl_lib``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import torch

from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from .run import Run

__all__ = ["RunCache", "cache_dir"]


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

    def path(self, key: str) -> Path:
        return self.root / f"{key}.pt"

    def checkpoint_path(self, keys: Sequence[str]) -> Path:
        digest = hashlib.sha256("|".join(sorted(keys)).encode()).hexdigest()[:24]
        return self.root / "ckpt" / f"{digest}.pt"

    def load(self, key: str):
        """The cached :class:`~icl_lib.engine.run.Run` for ``key``, or ``None``."""
        p = self.path(key)
        if not p.exists():
            return None
        payload = torch.load(p, map_location="cpu", weights_only=True)
        raw = json.loads(payload["spec"])
        spec = RunSpec(
            data=DataConfig(**raw["data"]),
            model=ModelConfig(**raw["model"]),
            train=TrainConfig(**raw["train"]),
            seed=raw["seed"],
        )
        meta = dict(payload["meta"], cached=True)
        return Run(spec=spec, params=payload["params"], history=payload["history"], meta=meta)

    def save(self, key: str, run) -> Path:
        """Store ``run`` atomically under ``key``."""
        payload = {
            "spec": json.dumps(run.spec.to_dict(), sort_keys=True),
            "params": run.params,
            "history": run.history,
            "meta": {k: v for k, v in run.meta.items() if k != "cached"},
        }
        p = self.path(key)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        torch.save(payload, tmp)
        os.replace(tmp, p)
        return p

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
