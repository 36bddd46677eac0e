"""The verdict every chapter ends with: one ``CLAIM`` line per checked statement of the papers.

A chapter records each claim with :meth:`Claims.check` as it measures it, then calls
:meth:`Claims.report` in its last cell, which prints

    CLAIM <id> PASS|FAIL measured=<value> expected=<condition>

for every claim, shows them as a table, and raises ``AssertionError`` if any failed, so CI (nbval)
and the book build fail with it.  A check compares the measurement with a closed form, a baseline
or a threshold stated in the chapter -- never with the code that produced it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Claims", "Claim", "format_value"]


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

    def line(self) -> str:
        return f"CLAIM {self.cid} {'PASS' if self.passed else 'FAIL'} measured={self.measured} expected={self.expected}"


class Claims:
    """Collects a chapter's claims and reports them (all chapters)."""

    def __init__(self, chapter: str, profile: str):
        self.chapter, self.profile = chapter, profile
        self.items: list[Claim] = []

    def check(self, cid: str, passed: bool, measured, expected: str, statement: str = "") -> bool:
        """Record claim ``cid``: ``passed`` is the outcome of the chapter's comparison."""
        if any(c.cid == cid for c in self.items):
            raise ValueError(f"cid={cid!r} is invalid: accepted an id not used before in this chapter")
        if " " in cid:
            raise ValueError(f"cid={cid!r} is invalid: accepted an id without spaces")
        claim = Claim(cid, bool(passed), format_value(measured), expected.replace(" ", ""), statement, self.profile)
        self.items.append(claim)
        return claim.passed

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
        try:
            from IPython.display import display

            display(self.table())
        except ImportError:  # pragma: no cover - outside IPython the lines suffice
            pass
        out = os.environ.get("ICL_CLAIMS_DIR")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            payload = {"chapter": self.chapter, "profile": self.profile, "claims": [asdict(c) for c in self.items]}
            Path(out, f"{self.chapter}.json").write_text(json.dumps(payload, indent=1))
        failed = [c.cid for c in self.items if not c.passed]
        if failed:
            raise AssertionError(f"{len(failed)} claim(s) failed in {self.chapter}: {', '.join(failed)}")
