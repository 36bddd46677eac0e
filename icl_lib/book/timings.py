"""Print how long each chapter took to execute in the last book build (``make book``).

Reads the execution records that Jupyter Book (MyST-NB with ``execute_notebooks: cache``) keeps in
``<build>/.jupyter_cache``; chapters whose source did not change since an earlier build are
reported as cached (not re-executed).

    python -m icl_lib.book.timings _build [--since UNIX_SECONDS]
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path


def execution_records(build: Path) -> list[dict]:
    """One dict per cached notebook execution: ``uri``, ``seconds``, ``created`` (UTC datetime)."""
    from jupyter_cache import get_cache

    cache_path = build / ".jupyter_cache"
    if not cache_path.exists():
        return []
    cache = get_cache(str(cache_path))
    rows = []
    for rec in cache.list_cache_records():
        created = rec.created
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        rows.append({"uri": rec.uri, "seconds": (rec.data or {}).get("execution_seconds"), "created": created})
    return sorted(rows, key=lambda r: r["uri"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path, nargs="?", default=Path("_build"))
    ap.add_argument("--since", type=float, default=None, help="only count executions after this UNIX time")
    args = ap.parse_args(argv)
    rows = execution_records(args.build)
    if not rows:
        print("no execution records found (was the book built with execute_notebooks: cache?)")
        return 0
    since = datetime.fromtimestamp(args.since, tz=timezone.utc) if args.since is not None else None
    total = 0.0
    print("chapter execution times (s):")
    for r in rows:
        fresh = since is None or r["created"] >= since
        secs = r["seconds"] or 0.0
        if fresh:
            total += secs
        name = Path(r["uri"]).name
        print(f"  {name:45s} {secs:8.1f}{'' if fresh else '  (cached, not re-executed)'}")
    print(f"sum of chapter execution times: {total:.1f} s (chapters run side by side: see bookexec's wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
