"""When a run's history establishes the pattern (3.1), Stage I and Stage II (paper 1, Sections 3 and 4.2).

* :class:`StageRules`, :func:`first_persistent_step`, :class:`StageSummary`, :func:`detect_stages`
  -- the steps at which a run's history establishes the pattern (3.1), Stage I (sign matching and
  zero-sum OV) and Stage II (homogeneous KQ scale, positive and negative groups), each by an
  explicit rule (chapter 2's pattern thresholds, fixed before any result);
* :func:`check_stage_heads`, :func:`sweep_stages`, :func:`shown_seed`, :func:`history_grid`,
  :func:`stage_table`, :func:`stage_statistics` -- chapter 3's stages of every run of chapter 2's
  sweep, the runs its figures show and the values it checks and glues;
* :func:`stage_estimates` -- chapter 3's stage claims as :class:`~icl_lib.stats.Estimate` s
  (fractions over runs, Clopper-Pearson; medians over runs, order statistics).

Used by chapter 3, and by chapter 9 (:func:`first_persistent_step`: the time to the pattern).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ...circuits import mu_of, omega_of, pattern_history
from ...definitions import value as definition
from ...stats import Estimate, median_ci, proportion_ci
from ...validate import check_float, check_int, fail, literal_list

__all__ = [
    "StageRules",
    "StageSummary",
    "first_persistent_step",
    "banded",
    "detect_stages",
    "check_stage_heads",
    "sweep_stages",
    "shown_seed",
    "history_grid",
    "stage_table",
    "stage_statistics",
    "stage_estimates",
]


# ------------------------------------------------------------------------------- stage detection
@dataclass(frozen=True)
class StageRules:
    """Thresholds of the stage rules (chapter 2's pattern thresholds, fixed before any result).

    A snapshot of the history is in

    * *pattern (3.1)* when the KQ off-diagonal ratio and the OV off-last ratio (pooled over the
      live heads, :func:`icl_lib.circuits.summarize_pattern`) are both below ``shape_tol``; once
      in it, a run leaves it only when a ratio rises above ``shape_tol * (1 + kind_band)`` (a
      band, so that a ratio jittering around the threshold is not a pattern lost);
    * *Stage I* (paper 1, Section 4.2, eq. 4.2) when every live head is sign-matched,
      ``sign omega_h = sign mu_h``, and the OV entries cancel, ``|sum mu_h| / sum |mu_h| < zero_sum_tol``;
    * *Stage II* (eq. 4.4) when the live heads form a positive and a negative group with a
      homogeneous KQ scale, ``(max - min) / mean |omega_h| < spread_tol``.

    A stage is *established* at the first logged step from which its condition holds at every
    later snapshot (:func:`first_persistent_step`).  ``shape_tol``, ``kind_band`` and
    ``dummy_tol``: ``None`` reads the definitions ``shape-tol``, ``kind-band`` and ``live-tol``
    (:mod:`icl_lib.definitions`), which also say which heads are live.  Chapter 3.
    """

    shape_tol: float | None = None  # KQ off-diag / diag and OV off-last / |mu| below this: pattern (3.1)
    zero_sum_tol: float = 0.1  # |sum_h mu_h| / sum_h |mu_h| below this: zero-sum OV
    spread_tol: float = 0.25  # (max - min) / mean of |omega_h| over live heads below this
    dummy_tol: float | None = None  # a head's scale below this share of the largest counts as lost
    kind_band: float | None = None  # in the form (3.1) until a ratio exceeds shape_tol * (1 + kind_band)

    def __post_init__(self):
        for name, key in (("shape_tol", "shape-tol"), ("dummy_tol", "live-tol"), ("kind_band", "kind-band")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, definition(key))
        for name in ("shape_tol", "zero_sum_tol", "spread_tol", "dummy_tol"):
            object.__setattr__(self, name, check_float(name, getattr(self, name), 0.0, 10.0, lo_open=True))
        object.__setattr__(self, "kind_band", check_float("kind_band", self.kind_band, 0.0, 10.0))


def banded(ratios: np.ndarray, tol: float, band: float) -> np.ndarray:
    """Whether a history is in a form read with a band, ``(T,)`` booleans from ``ratios (T, k)``:
    it enters when every ratio is below ``tol`` and leaves when one rises above ``tol * (1 +
    band)`` (``band = 0``: each snapshot on its own).  Chapter 3's pattern (3.1) along training."""
    ratios = np.asarray(ratios, dtype=float).reshape(len(ratios), -1)
    below, above = (ratios < tol).all(1), (ratios > tol * (1 + band)).any(1)
    state, out = False, np.zeros(len(ratios), bool)
    for t in range(len(ratios)):
        state = bool(below[t]) or (state and not above[t])
        out[t] = state
    return out


def first_persistent_step(steps: Sequence[int], flags: Sequence[bool]) -> int | None:
    """The first logged step from which ``flags`` stays true to the end; ``None`` if the last is false.

    The rule of chapter 2's "from which step does a seed stay in the pattern"; chapter 3's stages.
    """
    steps, flags = np.asarray(steps), np.asarray(flags, dtype=bool)
    if steps.shape != flags.shape or steps.ndim != 1 or len(steps) == 0:
        raise ValueError(f"flags.shape={flags.shape} is invalid: accepted one flag per logged step {steps.shape}")
    if not flags[-1]:
        return None
    tail = np.cumprod(flags[::-1])[::-1].astype(bool)  # True where flags hold from here to the end
    return int(steps[np.argmax(tail)])


@dataclass
class StageSummary:
    """What :func:`detect_stages` finds in one run's history (chapter 3)."""

    steps: np.ndarray  # (T,) logged steps
    omega: np.ndarray  # (T, H) omega_h along training
    mu: np.ndarray  # (T, H) mu_h along training
    shape: np.ndarray  # (T,) pattern (3.1) holds
    stage1: np.ndarray  # (T,) sign matching and zero-sum OV hold
    stage2: np.ndarray  # (T,) homogeneous KQ scale with positive and negative groups
    shape_step: int | None  # pattern (3.1) established (kept from here to the end)
    stage1_step: int | None  # Stage I established
    stage2_step: int | None  # Stage II established
    groups: list[str] = field(default_factory=list)  # final group of each head
    kind: str = ""  # final pattern kind (chapter 2): "pos/neg", "single-sign", "single-head"

    @property
    def live(self) -> np.ndarray:
        """Heads that are not dummy at the end, ``(H,)`` booleans."""
        return np.array([g != "dummy" for g in self.groups])

    def head_labels(self) -> list[str]:
        """``"head h (group)"`` for every head, the legend of the figures of chapter 3."""
        return [f"head {h + 1} ({g})" for h, g in enumerate(self.groups)]

    def marks(self) -> dict:
        """The detected steps as ``{label: step}`` for :func:`icl_lib.figures.dynamics` (found ones only)."""
        named = {"(3.1)": self.shape_step, "I": self.stage1_step, "II": self.stage2_step}
        return {k: v for k, v in named.items() if v is not None}

    def merged_marks(self) -> dict:
        """:meth:`marks` with labels of equal steps joined (``"(3.1), II"``), for readable plots."""
        by_step: dict[int, list[str]] = {}
        for k, v in self.marks().items():
            by_step.setdefault(v, []).append(k)
        return {", ".join(ks): v for v, ks in by_step.items()}

    def group_mu(self) -> np.ndarray:
        """``|sum_h mu_h|`` over the heads of the final positive and negative groups along training,
        shape ``(T, 2)`` (columns: positive, negative).  These sums, not the split of ``mu`` inside a
        group, determine the predictor (paper 1, Section 4.3)."""
        pos = np.array([g == "positive" for g in self.groups])
        neg = np.array([g == "negative" for g in self.groups])
        return np.abs(np.stack([self.mu[:, pos].sum(1), self.mu[:, neg].sum(1)], 1))


def detect_stages(KQ: torch.Tensor, OV: torch.Tensor, steps, d: int, rules: StageRules | None = None) -> StageSummary:
    """Stage boundaries of one run's history ``KQ (T, H, D, D)``, ``OV (T, H, N, D)`` at ``steps (T,)``.

    Applies the rules of :class:`StageRules` at every snapshot and returns the first logged step
    from which each holds to the end (paper 1, Section 4.2: Stage I, then Stage II).  Chapter 3.
    """
    rules = StageRules() if rules is None else rules
    if not isinstance(rules, StageRules):
        raise ValueError(f"rules={rules!r} is invalid: accepted a StageRules")
    steps = np.asarray(torch.as_tensor(steps).cpu().numpy())
    hist = pattern_history(KQ, OV, d, tol=rules.dummy_tol)
    if len(hist) != len(steps):
        raise ValueError(f"steps has {len(steps)} entries: accepted one per snapshot ({len(hist)})")
    shape = banded(np.array([[p.kq_offdiag, p.ov_offlast] for p in hist]), rules.shape_tol, rules.kind_band)
    stage1 = np.array([p.heads > 1 and p.sign_matched and p.zero_sum < rules.zero_sum_tol for p in hist])
    stage2 = np.array([p.kind == "pos/neg" and p.omega_spread < rules.spread_tol for p in hist])
    w = omega_of(KQ.double(), d).numpy()  # (T, H)
    m = mu_of(OV.double(), d).numpy()  # (T, H)
    return StageSummary(
        steps=steps,
        omega=w,
        mu=m,
        shape=shape,
        stage1=stage1,
        stage2=stage2,
        shape_step=first_persistent_step(steps, shape),
        stage1_step=first_persistent_step(steps, stage1),
        stage2_step=first_persistent_step(steps, stage2),
        groups=hist[-1].groups,
        kind=hist[-1].kind,
    )


# ------------------------------------------------------------------------------- chapter 3's tables
# The functions below turn chapter 2's sweep of trained runs (``{H: [Run per seed]}``, from
# :func:`icl_lib.paper1.sweeps.heads_sweep_specs`, trained) into the stage tables and values that chapter 3 shows,
# checks as claims and glues into its text.

STAGE_HEADS_MAX = 8  # most heads of a chapter-3 model: training time and figure width


def check_stage_heads(heads, hi: int = STAGE_HEADS_MAX) -> list[int]:
    """Chapter 3's ``heads`` parameter (one int or a non-empty list) as a sorted list of distinct
    head counts in ``[2, hi]``: Stages I and II (paper 1, Section 4.2) need two heads.

    The text of a list or an int is read as one (papermill's ``-p heads [2,4]`` passes the text
    ``"[2,4]"``)."""
    hi = check_int("hi", hi, 2)
    accepted = f"an integer in [2, {hi}] or a non-empty list of them"
    values = literal_list("heads", heads)
    if isinstance(values, str) and values.strip().isdigit():  # the text of one head count
        values = int(values)
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        fail("heads", heads, accepted)
    return sorted({check_int("heads", H, 2, hi) for H in values})


def sweep_stages(sweep: dict, d: int, rules: StageRules | None = None) -> dict[int, list[StageSummary]]:
    """:func:`detect_stages` of every run of a sweep ``{H: [runs]}``: ``{H: [StageSummary]}`` in the
    sweep's order (paper 1, Section 4.2).  Chapter 3."""
    return {
        H: [detect_stages(r.history["KQ"], r.history["OV"], r.history["step"], d, rules) for r in runs]
        for H, runs in sweep.items()
    }


def shown_seed(stages: Sequence[StageSummary]) -> int:
    """Index of the run that chapter 3's figures show among one head count's seeds: the first, or
    for ``H >= 3`` the first that ends with a dummy head (if any), so the figures show every kind of
    head.  Chosen by the final groups, not by the dynamics."""
    if len(stages[0].groups) >= 3:
        for k, st in enumerate(stages):
            if "dummy" in st.groups:
                return k
    return 0


def history_grid(run) -> dict:
    """The logged steps of one run's history: ``n_log`` snapshots, the last step ``steps`` and the
    largest gap ``log_gap`` between consecutive snapshots (chapter 3's resolution of the stages)."""
    steps = run.history["step"]  # (T,)
    return {"n_log": len(steps), "steps": int(steps[-1]), "log_gap": float(np.diff(steps.numpy()).max())}


STAGE_COLUMNS = ["H", "seed", "final pattern", "groups", "(3.1) first", "pattern (3.1)", "Stage I", "Stage II"]


def stage_table(sweep: dict, stages: dict, heads: Sequence[int]) -> pd.DataFrame:
    """One row per run of the head counts ``heads``: its final pattern, its heads' groups (first
    letters), the first logged step at which pattern (3.1) holds (``(3.1) first``; ``NaN``: never)
    and the steps from which pattern (3.1), Stage I and Stage II hold to the end (``NaN``: not
    within the budget).  Paper 1, Section 4.2; chapter 3."""
    rows = [
        {"H": H, "seed": run.spec.seed, "final pattern": st.kind, "groups": " ".join(g[0] for g in st.groups),
         "(3.1) first": float(st.steps[np.argmax(st.shape)]) if st.shape.any() else float("nan"),
         "pattern (3.1)": st.shape_step, "Stage I": st.stage1_step, "Stage II": st.stage2_step}
        for H in heads
        for run, st in zip(sweep[H], stages[H])
    ]
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def stage_statistics(table: pd.DataFrame, last: int) -> dict:
    """The values of chapter 3's stage claims from :func:`stage_table` (``last``: the last step):

    ``kept_all`` (every run keeps pattern (3.1) to the end), ``median_shape`` (median step of (3.1),
    ``NaN`` unless ``kept_all``), ``n_both`` (runs where both stages are found), ``order_frac``
    (fraction of those with Stage I no later than Stage II), ``n_strict`` (strictly earlier),
    ``both_frac`` (``{H: fraction of seeds with both stages}``) and ``late`` (runs whose (3.1)
    comes after a quarter of training).  Paper 1, Section 4.2.
    """
    shape_steps = table["pattern (3.1)"]
    kept_all = bool(shape_steps.notna().all())
    both = table.dropna(subset=["Stage I", "Stage II"])
    found = table["Stage I"].notna() & table["Stage II"].notna()
    return {
        "kept_all": kept_all,
        "median_shape": float(shape_steps.median()) if kept_all else float("nan"),
        "n_both": len(both),
        "order_frac": float((both["Stage I"] <= both["Stage II"]).mean()) if len(both) else float("nan"),
        "n_strict": int((both["Stage I"] < both["Stage II"]).sum()),
        "both_frac": {int(H): float(found[table.H == H].mean()) for H in table["H"].unique()},
        "late": table[table["pattern (3.1)"] > 0.25 * last],
    }


def stage_estimates(table: pd.DataFrame, last: int) -> dict:
    """Chapter 3's stage claims as :class:`~icl_lib.stats.Estimate` s, from :func:`stage_table`
    (one row per run; ``last``: the last step).  ``shape_step``: the median over all runs of the
    step from which pattern (3.1) holds to the end (a run that never establishes it counts as
    ``last + 1``, beyond the budget); ``kept``: the fraction of runs in the pattern at the end;
    ``order``: among the runs where both stages are found, the fraction with Stage I no later
    than Stage II; ``both``: ``{H: fraction of the runs of H with both stages}``.  Paper 1,
    Sections 3 and 4.2."""
    shape = table["pattern (3.1)"].astype(float)
    both = table.dropna(subset=["Stage I", "Stage II"])
    found = table["Stage I"].notna() & table["Stage II"].notna()
    return {
        "shape_step": median_ci(shape.fillna(last + 1).to_numpy()),
        "kept": proportion_ci(int(shape.notna().sum()), len(table)),
        "order": proportion_ci(int((both["Stage I"] <= both["Stage II"]).sum()), max(len(both), 1))
        if len(both) else Estimate(math.nan, 0.0, 1.0, what="no run with both stages"),
        "both": {int(H): proportion_ci(int(found[table.H == H].sum()), int((table.H == H).sum()))
                 for H in table["H"].unique()},
    }
