"""Observation 4 of paper 1, Section 3: ``|omega_h|`` rises then falls, ``|mu_h|`` rises steadily.

* :func:`peak_profile` -- the rise-then-fall measurements of ``|omega_h|`` and the rise of
  ``|mu_h|`` per head of one run's history;
* :func:`observation_table`, :func:`observation_summary` -- per head of chapter 2's sweep, and the
  fraction of heads that meet each rule per head count;
* :func:`observation_runs`, :func:`run_fraction` -- the same per run, with the fractions of runs
  (Clopper-Pearson intervals) on which chapter 3's claims are decided.

Used by chapter 3.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ...stats import Estimate, proportion_ci
from ...validate import fail

__all__ = [
    "peak_profile",
    "observation_table",
    "observation_summary",
    "FALL_TOL",
    "observation_runs",
    "run_fraction",
]


def peak_profile(steps, values) -> dict:
    """Rise-then-fall measurements of ``|values| (T, H)`` per head (paper 1, Section 3, Observation 4).

    Returns per head (arrays of shape ``(H,)``): ``peak_step``, ``peak`` (max over the history of
    the absolute value), ``start``, ``final``, ``mid`` (at the logged step closest to half of the
    last step), ``drop = 1 - final / peak`` (0 when the maximum is at the end) and
    ``rise = peak / start``.  Chapter 3.
    """
    steps = np.asarray(steps, dtype=float)
    a = np.abs(np.asarray(values, dtype=float))
    if a.ndim == 1:
        a = a[:, None]
    if a.shape[0] != len(steps):
        raise ValueError(f"values has {a.shape[0]} rows: accepted one per logged step ({len(steps)})")
    k = a.argmax(0)
    mid = int(np.argmin(np.abs(steps - steps[-1] / 2)))
    peak = a.max(0)
    return {
        "peak_step": steps[k],
        "peak": peak,
        "start": a[0],
        "mid": a[mid],
        "final": a[-1],
        "drop": 1.0 - a[-1] / peak,
        "rise": peak / a[0],
    }


OBS_COLUMNS = [
    "H", "seed", "head", "group", "omega peak step", "omega rise", "omega drop", "mu final/max",
    "mu final/mid", "group mu final/max", "group mu final/mid",
]
OBS_RULES = ["omega rises then falls", "mu rises (head)", "mu rises (group)"]


def observation_table(sweep: dict, stages: dict, heads: Sequence[int]) -> pd.DataFrame:
    """Observation 4 of paper 1, Section 3, per head: one row per head that is not dummy at the end
    of a run that ends in the positive/negative pattern, with :func:`peak_profile` of
    ``|omega_h|``, ``|mu_h|`` and of its group's ``|sum mu_h|``, and the three rules of chapter 3:
    ``omega rises then falls`` (peak >= 2 x start, final >= 10% below the peak), ``mu rises (head)``
    and ``mu rises (group)`` (final >= 0.95 x maximum and above mid-training).
    """
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            if st.kind != "pos/neg":
                continue
            pw, pm = peak_profile(st.steps, st.omega), peak_profile(st.steps, st.mu)
            pg = peak_profile(st.steps, st.group_mu())
            for h in np.flatnonzero(st.live):
                g = 0 if st.groups[h] == "positive" else 1  # column of the head's group in group_mu()
                rows.append({
                    "H": H, "seed": run.spec.seed, "head": h + 1, "group": st.groups[h],
                    "omega peak step": pw["peak_step"][h], "omega rise": pw["rise"][h],
                    "omega drop": pw["drop"][h], "mu final/max": pm["final"][h] / pm["peak"][h],
                    "mu final/mid": pm["final"][h] / pm["mid"][h],
                    "group mu final/max": pg["final"][g] / pg["peak"][g],
                    "group mu final/mid": pg["final"][g] / pg["mid"][g],
                })
    obs = pd.DataFrame(rows, columns=OBS_COLUMNS)
    obs["omega rises then falls"] = (obs["omega rise"] >= 2) & (obs["omega drop"] >= 0.1)
    obs["mu rises (head)"] = (obs["mu final/max"] >= 0.95) & (obs["mu final/mid"] > 1)
    obs["mu rises (group)"] = (obs["group mu final/max"] >= 0.95) & (obs["group mu final/mid"] > 1)
    return obs


def observation_summary(obs: pd.DataFrame) -> pd.DataFrame:
    """Per head count, the fraction of heads of :func:`observation_table` that meet each rule and
    the number of heads (paper 1, Observation 4).  Chapter 3."""
    summary = obs.groupby("H")[OBS_RULES].mean()
    summary["heads"] = obs.groupby("H").size()
    return summary


FALL_TOL = 0.1  # |omega_h| "falls" when its final value is at least this fraction below its peak


RUN_COLUMNS = ["H", "seed", "final pattern", "live heads", "omega drop (median head)", "omega falls",
               "group mu final/max (min)", "group mu final/mid (min)", "mu rises", "group mu late slope (min)"]


def late_slope(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The least-squares slope of ``log values`` on ``log step`` over the snapshots of the second half
    of training (steps at least half the last), per column of ``values (T, k)``: the trend of a
    growth ("increases steadily", chapter 3).  ``nan`` for a column with fewer than three such
    snapshots or a non-positive value."""
    steps, values = np.asarray(steps, float), np.asarray(values, float).reshape(len(steps), -1)
    late = steps >= steps[-1] / 2
    out = np.full(values.shape[1], np.nan)
    if late.sum() < 3:
        return out
    x = np.log(np.maximum(steps[late], 1.0))
    for j in range(values.shape[1]):
        v = values[late, j]
        if (v > 0).all():
            out[j] = float(np.polyfit(x, np.log(v), 1)[0])
    return out


def observation_runs(sweep: dict, stages: dict, heads: Sequence[int], fall_tol: float = FALL_TOL) -> pd.DataFrame:
    """Observation 4 of paper 1, Section 3, per run (every run, whatever its final pattern): the
    median over its non-dummy heads of the fall ``1 - final / peak`` of ``|omega_h|`` and whether
    it reaches ``fall_tol`` (``omega falls``); for the OV side, the smallest over its final groups
    (positive, negative; one group for a single-sign run) of ``|sum mu_h|`` at the end against its
    maximum and against mid-training, and whether every group ends within 5% of its maximum and
    above mid-training (``mu rises``); and the smallest over its groups of the trend of
    ``log|sum mu_h|`` on ``log step`` in the second half of training (:func:`late_slope`: a growth
    that goes on has it above 0).  Chapter 3."""
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            pw = peak_profile(st.steps, st.omega)
            live = np.flatnonzero(st.live)
            drop = float(np.median(pw["drop"][live]))
            gm = st.group_mu()  # (T, 2) positive, negative
            present = [g for g, name in enumerate(("positive", "negative")) if name in st.groups]
            pg = peak_profile(st.steps, gm[:, present])
            fmax = float((pg["final"] / pg["peak"]).min())
            fmid = float((pg["final"] / pg["mid"]).min())
            rows.append({"H": H, "seed": run.spec.seed, "final pattern": st.kind, "live heads": len(live),
                         "omega drop (median head)": drop, "omega falls": drop >= fall_tol,
                         "group mu final/max (min)": fmax, "group mu final/mid (min)": fmid,
                         "mu rises": fmax >= 0.95 and fmid > 1.0,
                         "group mu late slope (min)": float(np.min(late_slope(st.steps, gm[:, present])))})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def run_fraction(table: pd.DataFrame, H: int, column: str) -> Estimate:
    """The fraction of the runs of ``H`` in ``table`` whose boolean ``column`` holds, with its
    Clopper-Pearson interval (the runs are independent seeds).  Chapter 3."""
    sub = table[table.H == H][column].astype(bool)
    if not len(sub):
        fail("H", H, f"a head count of the table ({sorted(table.H.unique())})")
    return proportion_ci(int(sub.sum()), len(sub))
