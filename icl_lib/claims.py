"""The verdict every chapter ends with: one ``CLAIM`` line per checked statement of the papers.

A chapter records each claim with :meth:`Claims.check` as it measures it, then calls
:meth:`Claims.report` in its last cell, which prints

    CLAIM <id> PASS|FAIL measured=<value> expected=<condition>

for every claim, shows them as a table, and raises ``AssertionError`` if any failed, so CI (nbval)
and the book build fail with it.  A check compares the measurement with a closed form, a baseline
or a threshold stated in the chapter -- never with the code that produced it.

In a notebook it also records the same claims as JSON (the chapter, its profile and device, the
library versions, and every claim with the paper's statement and the cell that checked it) in a
MyST-NB ``glue`` record named :data:`CLAIMS_GLUE_KEY`, of media type :data:`CLAIMS_MIME`.  Nothing
shows it; the book's claims dashboard and execution-status page (``book/_ext/icl_book.py``) read it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .config import DEVICES, resolve_device
from .validate import check_choice
from .version import __version__

__all__ = ["Claims", "Claim", "format_value", "CLAIM_LINE", "CLAIMS_MIME", "CLAIMS_GLUE_KEY"]

# The machine-readable claims that Claims.report() records: a glue record (the format of
# myst_nb.glue(..., display=False) and scrapbook), so that notebook front-ends and the book show
# nothing of it and MyST-NB keeps it with the chapter's glue data.
CLAIMS_MIME = "application/vnd.icl-lib.claims+json"
CLAIMS_GLUE_KEY = "icl_claims"
_GLUE_PREFIX = "application/papermill.record/"
# One printed claim, as Claim.line() writes it; the book's extension and its browser test read it.
CLAIM_LINE = re.compile(r"^CLAIM (\S+) (PASS|FAIL) measured=(\S*) expected=(\S*)\s*$", re.M)


def format_value(value) -> str:
    """Compact text for a measured value: 4 significant digits for floats, lists element-wise."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return format_value(value.item())
    return str(value).replace(" ", "")


@dataclass
class Claim:
    cid: str  # short identifier, unique in the chapter
    passed: bool
    measured: str
    expected: str  # the condition checked, in words or symbols
    statement: str  # the paper's claim being checked
    profile: str
    cell: int | None = None  # IPython execution count of the cell that checked it (None outside IPython)

    def line(self) -> str:
        return f"CLAIM {self.cid} {'PASS' if self.passed else 'FAIL'} measured={self.measured} expected={self.expected}"


class Claims:
    """Collects a chapter's claims and reports them (all chapters)."""

    def __init__(self, chapter: str, profile: str, device: str = "auto"):
        check_choice("device", device, DEVICES)
        self.chapter, self.profile, self.device = chapter, profile, device
        self.items: list[Claim] = []

    def check(self, cid: str, passed: bool, measured, expected: str, statement: str = "") -> None:
        """Record claim ``cid``: ``passed`` is the outcome of the chapter's comparison.

        Returns nothing, so a check as the last line of a cell adds no output to the chapter."""
        if any(c.cid == cid for c in self.items):
            raise ValueError(f"cid={cid!r} is invalid: accepted an id not used before in this chapter")
        if " " in cid:
            raise ValueError(f"cid={cid!r} is invalid: accepted an id without spaces")
        claim = Claim(
            cid, bool(passed), format_value(measured), expected.replace(" ", ""), statement, self.profile, _cell_number()
        )
        self.items.append(claim)

    def payload(self) -> dict:
        """The claims and where they ran, as JSON-ready data (the :data:`CLAIMS_MIME` output)."""
        return {
            "chapter": self.chapter,
            "profile": self.profile,
            "device": _device_name(self.device),
            "icl_lib": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "claims": [asdict(c) for c in self.items],
        }

    def table(self):
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "claim": c.cid,
                    "verdict": "PASS" if c.passed else "FAIL",
                    "measured": c.measured,
                    "expected": c.expected,
                    "statement": c.statement,
                }
                for c in self.items
            ]
        )

    def report(self) -> None:
        """Print the ``CLAIM`` lines, display the table, and fail if any claim failed."""
        if not self.items:
            raise AssertionError(f"chapter {self.chapter} checked no claim")
        for c in self.items:
            print(c.line())
        payload = self.payload()
        try:
            from IPython import get_ipython
            from IPython.display import display

            import pandas as pd

            with pd.option_context("display.max_colwidth", None):  # the statements in full
                display(self.table())
            if get_ipython() is not None:  # the same claims as JSON, for the book's dashboard
                record = {"scrapbook": {"name": CLAIMS_GLUE_KEY, "mime_prefix": _GLUE_PREFIX}}
                display({_GLUE_PREFIX + CLAIMS_MIME: payload}, metadata=record, raw=True)
        except ImportError:  # pragma: no cover - outside IPython the lines suffice
            pass
        out = os.environ.get("ICL_CLAIMS_DIR")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, f"{self.chapter}.json").write_text(json.dumps(payload, indent=1))
        failed = [c.cid for c in self.items if not c.passed]
        if failed:
            raise AssertionError(f"{len(failed)} claim(s) failed in {self.chapter}: {', '.join(failed)}")


def _cell_number() -> int | None:
    """The execution count of the notebook cell running now (the book links each claim to it)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    shell = get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    # the running cell's source is already the last input (index = its execution count) in every
    # IPython version, while ``shell.execution_count`` is bumped before or after the run depending on it
    return len(history) - 1 if history else None


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (<GPU name>)``, for the device that ``device`` resolves to."""
    try:
        dev = resolve_device(device)
    except ValueError:  # e.g. device="cuda" where there is none: say what was asked for
        return str(device)
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return dev.type
