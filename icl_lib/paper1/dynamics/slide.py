"""The transitional optimality (4.3) and the solution manifold (4.5) along trained runs (paper 1, Section 4.2).

* :func:`eta_history`, :func:`manifold_scales`, :func:`manifold_slope` -- ``eta(t) = sum_h mu_h
  omega_h`` along a run, the two coordinates of the manifold (4.5) and how the group OV weight
  follows the KQ scale while the run slides along it;
* :func:`optimality_table` -- per run of chapter 2's sweep, when (4.3) is established and how the
  run slides along (4.5);
* :func:`optimality_estimates`, :func:`settle_order_estimate` -- chapter 3's claims on them.

Used by chapter 3 (its figures: :mod:`icl_lib.figures.stages`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from ...stats import Estimate, median_ci, proportion_ci
from ...validate import fail
from ..approx_loss import ApproxLossConfig, s_star
from .stage_detection import StageSummary, first_persistent_step

__all__ = [
    "SETTLE_TOL",
    "eta_history",
    "manifold_scales",
    "manifold_slope",
    "optimality_table",
    "optimality_estimates",
    "settle_order_estimate",
]


# Every claim of chapter 3 is decided on an interval (:mod:`icl_lib.stats`).  The unit of
# replication of a trained model is its seed: fractions are over runs (Clopper-Pearson), medians
# over runs (order-statistic interval).

SETTLE_TOL = 0.1  # (4.3) is established from the first step after which |eta / s* - 1| stays below this


def eta_history(st: StageSummary) -> np.ndarray:
    """``eta(t) = sum_h mu_h omega_h`` along a run's history, shape ``(T,)``: the left-hand side of
    the transitional optimality condition (4.3) and the effective step of debiased GD (Section
    4.3).  Chapter 3."""
    return (st.omega * st.mu).sum(1)


def manifold_scales(st: StageSummary) -> tuple[np.ndarray, np.ndarray]:
    """The two coordinates of the solution manifold (4.5) along a run's history: ``omega_bar (T,)``,
    the mean ``|omega_h|`` over the heads that are not dummy at the end, and ``mu_bar (T,)``, the
    mean over the final positive and negative groups of ``|sum_h mu_h|`` (the group's OV weight,
    the only part of ``mu`` the predictor sees).  Chapter 3."""
    w_bar = np.abs(st.omega[:, st.live]).mean(1)
    present = [g for g, name in enumerate(("positive", "negative")) if name in st.groups]
    m_bar = st.group_mu()[:, present].mean(1)
    return w_bar, m_bar


def manifold_slope(steps, w_bar, m_bar, start: int, min_points: int = 9) -> tuple[float, float, int]:
    """How the group OV weight follows the KQ scale while the run slides along the manifold:
    ``(slope, dlog_omega, n)`` over the ``n`` logged steps ``>= start``, where ``slope`` is
    ``dlog_mu / dlog_omega`` between the medians of ``log mu_bar`` and ``log omega_bar`` over the
    first and the last third of those steps (medians: robust to the step-to-step jitter of Adam,
    which would bias a least-squares slope towards 0).  On the manifold (4.5) ``2 mu_bar omega_bar
    = s(omega_bar)``, nearly constant, so the slope is ``-1``.  ``NaN`` with fewer than
    ``min_points`` steps, or when ``omega_bar`` moved by less than 2% (``|dlog_omega| < 0.02``:
    nothing to measure).  Chapter 3."""
    steps = np.asarray(steps)
    keep = steps >= start
    n = int(keep.sum())
    if n < min_points:
        return math.nan, math.nan, n
    lw, lm = np.log(np.asarray(w_bar)[keep]), np.log(np.asarray(m_bar)[keep])
    k = n // 3
    dw = float(np.median(lw[-k:]) - np.median(lw[:k]))
    dm = float(np.median(lm[-k:]) - np.median(lm[:k]))
    return (dm / dw if abs(dw) >= 0.02 else math.nan), dw, n


OPT_COLUMNS = ["H", "seed", "final pattern", "Stage I", "Stage II", "(4.3) from", "eta/s* (late)",
               "eta/s* (end)", "slide from", "omega_bar change", "slope dlog mu/dlog omega", "slide steps"]


def optimality_table(sweep: dict, stages: dict, heads: Sequence[int], cfg: ApproxLossConfig,
                     tol: float = SETTLE_TOL) -> pd.DataFrame:
    """The transitional optimality (4.3) and the solution manifold (4.5) along every run of the
    head counts ``heads`` (paper 1, Section 4.2): per run, the steps from which Stage I and Stage
    II hold (:func:`~icl_lib.paper1.dynamics.stage_detection.detect_stages`), the step ``(4.3)
    from`` after which ``|eta / s* - 1| < tol`` holds to the end (``s* = 1 / (1 + (1 + sigma2) d /
    L)``, :func:`~.approx_loss.s_star`), ``eta / s*`` as the median over the second half of training
    (``late``) and at the end; and, for runs that reach both Stage II and (4.3), the slide along the
    manifold from the later of the two steps (``slide from``) to the end: the relative change of
    ``omega_bar`` and :func:`manifold_slope`.  Chapter 3."""
    ss = s_star(cfg)
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            ratio = eta_history(st) / ss
            settled = first_persistent_step(st.steps, np.abs(ratio - 1) < tol)
            late = st.steps >= st.steps[-1] / 2
            row = {"H": H, "seed": run.spec.seed, "final pattern": st.kind, "Stage I": st.stage1_step,
                   "Stage II": st.stage2_step, "(4.3) from": settled,
                   "eta/s* (late)": float(np.median(ratio[late])), "eta/s* (end)": float(ratio[-1]),
                   "slide from": None, "omega_bar change": math.nan, "slope dlog mu/dlog omega": math.nan,
                   "slide steps": 0}
            if st.stage2_step is not None and settled is not None:
                start = max(st.stage2_step, settled)
                w_bar, m_bar = manifold_scales(st)
                slope, dw, n = manifold_slope(st.steps, w_bar, m_bar, start)
                row.update({"slide from": start, "omega_bar change": math.expm1(dw) if np.isfinite(dw) else math.nan,
                            "slope dlog mu/dlog omega": slope, "slide steps": n})
            rows.append(row)
    return pd.DataFrame(rows, columns=OPT_COLUMNS)


def optimality_estimates(table: pd.DataFrame, H: int) -> dict:
    """Chapter 3's estimates of (4.3) and (4.5) for the runs of ``H`` in :func:`optimality_table`:

    * ``eta``: median of ``eta/s* (late)`` over the runs that established Stage I (the condition's
      precondition: sign matching and zero-sum OV), order-statistic interval; ``eta_all``: the
      same over every run (shown beside it, never hidden);
    * ``slope``: median over the runs with a measured slide of ``dlog mu_bar / dlog omega_bar``.

    Paper 1, Section 4.2 (eqs. 4.3, 4.5)."""
    sub = table[table.H == H]
    if not len(sub):
        fail("H", H, f"a head count of the table ({sorted(table.H.unique())})")
    stage1 = sub[sub["Stage I"].notna()]
    slopes = sub["slope dlog mu/dlog omega"].dropna()
    none = Estimate(math.nan, -math.inf, math.inf, what="no run")
    return {
        "eta": median_ci(stage1["eta/s* (late)"]) if len(stage1) else none,
        "eta_all": median_ci(sub["eta/s* (late)"]),
        "slope": median_ci(slopes) if len(slopes) else none,
        "n_stage1": len(stage1), "n_slope": len(slopes), "n": len(sub),
    }


def settle_order_estimate(table: pd.DataFrame) -> Estimate:
    """Among the runs of :func:`optimality_table` where both are found, the fraction in which
    (4.3) is established no later than Stage II ("after (4.2) and (4.3) are established, the
    training enters the second stage", paper 1, Section 4.2), Clopper-Pearson interval."""
    both = table.dropna(subset=["(4.3) from", "Stage II"])
    if not len(both):
        return Estimate(math.nan, 0.0, 1.0, what="no run with both")
    return proportion_ci(int((both["(4.3) from"] <= both["Stage II"]).sum()), len(both))
