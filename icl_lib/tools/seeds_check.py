"""Do the verdicts a profile declares survive that profile's other seeds and shapes?

    python -m icl_lib.tools.seeds_check [--seeds 1 2 3] [--chapters 02,03] [--out _build/seeds-check]

Runs every chapter in the ``quick`` profile (papermill, a fresh kernel each) at each of ``seeds``
and at one other shape of the reader's range (a context length ``L`` of 32 where the chapter has
one, a dimension ``d`` of 4 otherwise), and reads each run's ``CLAIM`` and ``REPORTED`` lines.
A claim that FAILs in such a run must be one the chapter reports (its declaration's
``known_failure`` for the profile, said with why); an unreported FAIL is a verdict that holds at
the chapter's own seed only, and the command exits with status 1 listing them.  ``make
seeds-check`` runs it (about an hour on two cores).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ..parameters import BOOK, chapter_parameters
from ..claims import CLAIM_LINE

__all__ = ["variants", "failures", "main"]

_REPORTED = re.compile(r"^REPORTED (\S+) ", re.M)


def variants(notebook: Path, seeds: list[int]) -> list[dict]:
    """The parameter sets a chapter is checked at: each seed, then one other shape."""
    params = chapter_parameters(notebook)
    out = [{"seed": s} for s in seeds if "seed" in params]
    if "L" in params:
        out.append({"L": 32})
    elif "d" in params:
        out.append({"d": 4})
    return out


def failures(executed: dict) -> tuple[list[str], list[str], list[str]]:
    """``(claims printed, FAILs, FAILs the chapter reports)`` of an executed notebook's output."""
    text = "".join("".join(o.get("text", "")) for c in executed["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []) if o.get("name") == "stdout")
    lines = CLAIM_LINE.findall(text)
    failed = [cid for cid, verdict, *_ in lines if verdict == "FAIL"]
    reported = set(_REPORTED.findall(text))
    return [cid for cid, *_ in lines], failed, [cid for cid in failed if cid in reported]


def _run(notebook: Path, params: dict, out: Path, timeout: int) -> dict | None:
    args = [sys.executable, "-m", "papermill", str(notebook), str(out), "-k", "python3", "--no-progress-bar",
            "-p", "profile", "quick"]
    for k, v in params.items():
        args += ["-p", k, str(v)]
    env_note = ", ".join(f"{k}={v}" for k, v in params.items())
    try:
        subprocess.run(args, check=True, capture_output=True, text=True, timeout=timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        print(f"  {notebook.stem} ({env_note}): stopped: {str(err)[-300:]}", flush=True)
        return None
    return json.loads(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m icl_lib.tools.seeds_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--chapters", default="", help="comma-separated numbers (default: every chapter)")
    ap.add_argument("--out", default="", help="folder for the executed notebooks (default: a temporary one)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    args = ap.parse_args(argv)
    picked = [c.strip() for c in args.chapters.split(",") if c.strip()]
    chapters = [p for p in sorted(BOOK.glob("[0-9][0-9]_*.ipynb")) if not picked or p.name[:2] in picked]
    out = Path(args.out or tempfile.mkdtemp(prefix="icl-seeds-check-"))
    out.mkdir(parents=True, exist_ok=True)
    unreported, stopped = [], []
    for nb in chapters:
        for params in variants(nb, args.seeds):
            tag = "-".join(f"{k}{v}" for k, v in params.items())
            executed = _run(nb, params, out / f"{nb.stem}-{tag}.ipynb", args.timeout)
            if executed is None:
                stopped.append(f"{nb.stem} {tag}")
                continue
            claims, failed, reported = failures(executed)
            bad = [cid for cid in failed if cid not in reported]
            unreported += [f"{nb.stem} {tag}: {cid}" for cid in bad]
            print(f"{nb.stem} {tag}: {len(claims)} claims, {len(failed)} FAIL ({len(reported)} reported)"
                  + (f"; unreported: {', '.join(bad)}" if bad else ""), flush=True)
    print(f"seeds-check: {len(unreported)} unreported FAIL(s), {len(stopped)} run(s) stopped; notebooks in {out}")
    for line in unreported + [f"stopped: {s}" for s in stopped]:
        print(f"  {line}")
    return 1 if unreported or stopped else 0


if __name__ == "__main__":
    sys.exit(main())
