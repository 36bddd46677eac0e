"""Files written whole or not at all: run-cache entries, run-store entries and manifest, checkpoints.

:func:`write_atomic` writes the bytes of a file to a temporary file next to it
(``.<name>.<host>.<pid>.<n>.tmp``), then renames that over the file: a reader sees the old file or
the new one, never part of one.  Its callers serialise first, into memory (``torch.save`` or
``np.savez_compressed`` into a buffer), so that a write that fails is reported as itself -- a full
disk is ``ENOSPC``, not ``torch.save``'s "unexpected pos 5312 vs 5188" or "iostream error".  A
failed write (an ``OSError`` or ``RuntimeError`` while writing or renaming: a full disk, a quota,
a read-only folder) removes its temporary file and raises one :class:`WriteFailed` naming the
file, the bytes it needed, the space free there and the system's reason.  What a caller does
then is its own: :func:`icl_lib.train` returns runs it could not cache (with one warning line),
the trainer goes on when a periodic checkpoint fails, the run store raises.

A process killed while it writes (SIGKILL, out of memory) leaves its temporary file behind;
:func:`remove_stale_temporaries` removes those whose writer -- this host, that process id -- no
longer runs.  The run cache calls it when it opens its folder, the run store when it writes its
manifest, a trainer when it opens its checkpoint.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import itertools
import os
import re
import shutil
import socket
from pathlib import Path

__all__ = ["WriteFailed", "write_atomic", "temporary_path", "remove_stale_temporaries"]

_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0]) or "host"
_COUNT = itertools.count()  # several writes of one process (its threads) never share a temporary file
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.\d+\.tmp$")


class WriteFailed(OSError):
    """A file of the run cache, the run store or a checkpoint that could not be written; its
    temporary file is removed.  ``path``, ``size`` (the bytes it needed), ``errno`` (of the
    system's error, ``None`` when there was none) and ``cause`` (that error) say what happened."""

    def __init__(self, what: str, path: str | os.PathLike, size: int, cause: BaseException):
        self.what, self.path, self.size, self.cause = what, Path(path), int(size), cause
        code = getattr(cause, "errno", None)
        super().__init__(code, _reason(cause))
        self.filename = str(self.path)
        try:
            free = f"{shutil.disk_usage(self.path.parent).free:,} bytes free there"
        except OSError:
            free = "the space free there unknown"
        self.message = (f"{what} {self.path} could not be written ({self.size:,} bytes to write, {free}): "
                        f"{_reason(cause)}; its temporary file is removed")

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # pickled whole (a Dask worker's or a subprocess's error)
        return (type(self), (self.what, self.path, self.size, self.cause))


def _reason(err: BaseException) -> str:
    code = getattr(err, "errno", None)
    if isinstance(err, OSError) and code is not None:
        name = _errno.errorcode.get(code, "errno")
        return f"{name} (errno {code}): {err.strerror or os.strerror(code)}"
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(": ")


def temporary_path(path: Path) -> Path:
    """A fresh temporary file next to ``path`` for this process: ``.<name>.<host>.<pid>.<n>.tmp``."""
    return path.with_name(f".{path.name}.{_HOST}.{os.getpid()}.{next(_COUNT)}.tmp")


def _write(fh, data: bytes) -> None:
    """Write ``data`` to the open file ``fh`` (one place, so that the tests can fail it half-way)."""
    fh.write(data)


def write_atomic(path: str | os.PathLike, data: bytes, what: str) -> Path:
    """Write ``data`` to ``path`` whole or not at all (the module docstring): on failure the
    temporary file is removed and :class:`WriteFailed` raised, naming ``what`` the file is
    (``"run cache entry"``, ``"checkpoint"``, ...)."""
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as fh:
            _write(fh, data)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed(what, path, len(data), err) from err
    return path


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the temporary files of :func:`write_atomic` in ``folder`` (only those of the file
    ``name``, when given) whose writer ran on this host and no longer runs (it was killed while
    writing).  Returns the files removed; a folder that is missing or read-only is left as it is."""
    removed = []
    folder = Path(folder)
    try:
        candidates = [p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    except OSError:
        return removed
    for p in candidates:
        m = _TEMPORARY.match(p.name)
        if m is None or m["host"] != _HOST or (name is not None and m["name"] != name):
            continue
        pid = int(m["pid"])
        if pid == os.getpid() or _running(pid):
            continue
        with contextlib.suppress(OSError):
            p.unlink()
            removed.append(p)
    return removed
