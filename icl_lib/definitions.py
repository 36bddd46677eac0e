"""The definitions the book's verdicts rest on, each with the alternatives it declares.

A verdict depends on its claim's rule and on the definitions its measurement uses: which heads
are live, how far circuits may stray from the form (3.1), how a jitter around that threshold is
read along training, what fraction of seeds "consistently" asks for, and how a figure of one run
is read over seeds.  Each is declared here once, with its alternatives (the earlier definitions
among them), and every paper claim's committed record carries its verdict under each alternative
(:mod:`icl_lib.book.records`): the claims dashboard marks a verdict that flips as *fragile* and
shows the alternative's verdict.

Two kinds:

* ``"measurement"`` -- the definition changes what a chapter measures (which heads are live,
  whether a model has the form (3.1)).  :func:`value` reads the alternative in force from the
  environment variable ``ICL_DEFINITIONS`` (``"live-head=both"``; several joined by commas), and
  ``python -m icl_lib record run`` executes each chapter again under each alternative;
* ``"reading"`` -- the definition changes only the threshold a rule reads on the same
  measurement (the 0.9 of "consistently"): :meth:`icl_lib.claims.Claims.decide` decides it under
  each alternative in the same run.

The functions that read a definition name it (:mod:`icl_lib.circuits`: ``live-head``,
``live-tol``, ``shape-tol``; :mod:`icl_lib.paper1.dynamics.stage_detection`: ``kind-band``;
:mod:`icl_lib.claims.report`: ``consistently`` and ``one-run``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .validate import fail

__all__ = ["Definition", "DEFINITIONS", "ENV", "value", "active", "alternatives", "parse", "label"]

ENV = "ICL_DEFINITIONS"


@dataclass(frozen=True)
class Definition:
    """One definition: its ``key``, what it ``says`` with its ``value`` in force, its
    ``alternatives`` (``{value: what it says}``), its ``kind`` (``"measurement"`` or
    ``"reading"``) and ``since``: when the value in force was chosen, and whether after the runs
    it decides were seen."""

    key: str
    says: str
    value: object
    alternatives: dict
    kind: str
    since: str

    def __post_init__(self):
        if self.kind not in ("measurement", "reading"):
            fail("kind", self.kind, "'measurement' or 'reading'")
        if not self.alternatives or self.value in self.alternatives:
            fail("alternatives", self.alternatives, f"values other than the one in force ({self.value!r})")


DEFINITIONS: dict[str, Definition] = {d.key: d for d in (
    Definition("live-head", "a head is dummy (not live) when its KQ scale |omega_h| or its OV scale |mu_h| is "
               "below live-tol of the model's largest: a head that has lost either adds no term mu_h omega_h of "
               "the predictor's size", "either",
               {"both": "a head is dummy only when both |omega_h| and |mu_h| are below live-tol of the largest "
                        "(the definition before 2026-12-05)"},
               "measurement", "2026-12-05, after the runs (one failing head seen)"),
    Definition("live-tol", "the share of the model's largest scale below which a head's scale counts as lost",
               0.2, {0.1: "a tenth of the largest", 0.3: "three tenths of the largest"},
               "measurement", "2026-11-29, before the paper profile's runs"),
    Definition("shape-tol", "a model has the form (3.1) when, pooled over its live heads, the KQ mass off the "
               "diagonal and the OV mass off the label entry are each below this share of the diagonal and "
               "label mass", 0.5, {0.35: "a stricter form: 0.35", 0.65: "a looser form: 0.65"},
               "measurement", "2026-11-29, before the paper profile's runs"),
    Definition("kind-band", "along training, a run in the form (3.1) leaves it only when a ratio rises above "
               "shape-tol times (1 + this band), so that a ratio jittering around the threshold is not a "
               "pattern lost", 0.2, {0.0: "no band: every snapshot read on its own (the reading before "
                                           "2026-12-06)", 0.1: "a narrower band: 0.1"},
               "measurement", "2026-12-06, after the runs (one run jittering around the threshold seen)"),
    Definition("consistently", "the smallest fraction of seeds that 'consistently' asks for", 0.9,
               {0.8: "four in five seeds", 0.95: "nineteen in twenty seeds"},
               "reading", "2026-11-29, before the paper profile's runs"),
    Definition("one-run", "a paper's observation of one run (a figure, 'we observe') read over seeds as what "
               "training typically gives: the smallest fraction of seeds that show it", 0.5,
               {0.9: "read as 'consistently': 0.9"},
               "reading", "2026-12-06, after the runs (chapters read such observations as 0.5 and as 0.9)"),
)}


def parse(text: str | None) -> dict[str, object]:
    """``{key: value}`` of a text ``"live-head=both,live-tol=0.1"`` (the form of ``ICL_DEFINITIONS``),
    each key a measurement definition and each value one of its alternatives."""
    out: dict[str, object] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, _, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        d = DEFINITIONS.get(key)
        if d is None or d.kind != "measurement":
            fail(ENV, text, f"key=value pairs of the measurement definitions "
                            f"{sorted(k for k, x in DEFINITIONS.items() if x.kind == 'measurement')}")
        picked = [v for v in (d.value, *d.alternatives) if str(v) == raw]
        if not picked:
            fail(key, raw, f"one of {[d.value, *d.alternatives]}")
        out[key] = picked[0]
    return out


def active() -> dict[str, object]:
    """The measurement definitions set away from their values in force by ``ICL_DEFINITIONS``."""
    return {k: v for k, v in parse(os.environ.get(ENV)).items() if v != DEFINITIONS[k].value}


def value(key: str):
    """The value of definition ``key`` in force in this process (``ICL_DEFINITIONS`` may set a
    measurement definition to one of its alternatives)."""
    if key not in DEFINITIONS:
        fail("key", key, f"a definition of {sorted(DEFINITIONS)}")
    return active().get(key, DEFINITIONS[key].value)


def alternatives(kind: str = "measurement") -> list[tuple[str, object]]:
    """Every ``(key, alternative value)`` of the definitions of ``kind``, in declaration order."""
    return [(d.key, v) for d in DEFINITIONS.values() if d.kind == kind for v in d.alternatives]


def label(key: str, alt) -> str:
    """How the records and the dashboard name an alternative: ``"live-head=both"``."""
    return f"{key}={alt}"
