"""Linear attention with a fixed normaliser against softmax (paper 1, B.1, Figure 10).

* :func:`variant_errors` -- the errors of every 2-head variant's kept runs on the test sets of the
  sweep's length generalisation;
* :func:`linear_vs_softmax` -- the median losses over seeds against the closed-form predictions of
  each model's own circuits;
* :func:`linear_estimates` -- chapter 5's claims on linear attention: equal at the training
  length, following the fixed normaliser elsewhere, losing at every longer context.

Used by chapter 5.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...config import DataConfig
from ...engine import Run
from ...stats import LEVEL, Estimate, extreme, interval_image, seed_ratio
from ...stats.combine import _extreme_of_intervals, _quantile
from .trained import check_lengths, linearised
from .lengths import group_errors, median_curves

__all__ = [
    "variant_errors",
    "linear_vs_softmax",
    "linear_estimates",
]


# ----------------------------------------------------------------------------- B.1 and B.2
def variant_errors(
    kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int
) -> dict[str, torch.Tensor]:
    """:func:`~icl_lib.paper1.optimality.lengths.length_errors` of every variant's kept runs on the
    test sets of the sweep's :func:`~icl_lib.paper1.optimality.lengths.group_errors` (same purpose
    ``"length-sweep"``): ``{kind: (R, len(Ls), n_sets n)}``.  Paper 1, B.1 and Figure 10; chapter
    5."""
    return group_errors(kept, data, Ls, n, n_sets, seed)


def linear_vs_softmax(
    errors: Mapping[str, torch.Tensor], kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Linear attention with the fixed normaliser ``N = L_train`` against softmax (paper 1, B.1):
    the median losses over seeds (:func:`~icl_lib.paper1.optimality.lengths.median_curves`) and the
    closed-form predictions, medians over each model's own circuits -- vanilla GD pre-conditioned by
    ``Gamma L / N`` (:func:`~icl_lib.estimators.preconditioned_gd_risk`) for linear attention,
    debiased GD at the learned rate for softmax.  Returns the table (``softmax``, ``linear``,
    ``predicted softmax``, ``predicted linear``) and the two losses' standard errors, index ``L``
    (chapter 5)."""
    d, L, s2 = data.d, data.L, data.sigma2
    Ls = check_lengths(Ls)
    G_lin = linearised(kept["linear"], d)[0]  # (R, d, d)
    eta_soft = linearised(kept["softmax"], d)[1]  # (R,)
    pred_lin = np.array([[est.preconditioned_gd_risk(g * Lj / L, d, Lj, s2, debiased=False)
                          for Lj in Ls] for g in G_lin])  # (R, |Ls|)
    pred_soft = np.array([[est.debiased_gd_risk(float(e), d, Lj, s2) for Lj in Ls]
                          for e in eta_soft])  # (R, |Ls|)
    med, med_se = median_curves(errors, {"softmax": "softmax", "linear": "linear"})
    index = pd.Index(Ls, name="L")
    table = pd.DataFrame({**med, "predicted softmax": np.median(pred_soft, 0),
                          "predicted linear": np.median(pred_lin, 0)}, index=index)
    return table, pd.DataFrame(med_se, index=index)


def linear_estimates(
    errors: Mapping[str, torch.Tensor], kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int],
) -> tuple[dict, pd.DataFrame]:
    """Chapter 5's claims on linear attention (paper 1, B.1), from :func:`variant_errors`:

    * ``same`` -- ``loss_lin / loss_soft - 1`` at the training length (means over seeds,
      :func:`~icl_lib.stats.seed_ratio`, its t interval);
    * ``fixed`` -- the smallest over linear runs and lengths ``L != L_train`` of
      ``(|loss - R_adaptive| - |loss - R_fixed|) / R_fixed``, where ``R_fixed`` is the exact risk of
      vanilla GD with the run's ``Gamma L / N`` (the fixed normaliser ``N``) and ``R_adaptive`` with
      ``Gamma`` (a normaliser that follows ``L``): positive when the loss follows the fixed one;
    * ``beyond`` -- the smallest ``loss_lin / loss_soft - 1`` over ``L > L_train`` (``None`` if the
      grid has none): positive when linear attention loses at every longer context.

    Bonferroni-simultaneous intervals.  Also returns the table of ``loss_lin / loss_soft - 1`` at
    every ``L`` with its 95% interval (one length at a time)."""
    d, L, s2 = data.d, data.L, data.sigma2
    Ls = check_lengths(Ls)
    jL = Ls.index(L)
    lin, soft = errors["linear"], errors["softmax"]
    rows = []
    for j, Lj in enumerate(Ls):
        r, se, df = seed_ratio(lin[:, j], soft[:, j])
        q = _quantile(LEVEL, 1, df)
        rows.append({"L": Lj, "loss_lin/loss_soft - 1": r, "lo": r - q * se, "hi": r + q * se, "se": se,
                     "df": np.nan if df is None else df})
    table = pd.DataFrame(rows).set_index("L")
    same = table.loc[L]
    out = {"same": Estimate(float(same["loss_lin/loss_soft - 1"]), float(same["lo"]), float(same["hi"]), LEVEL,
                            "ratio of mean losses over seeds - 1, test-set and seed errors")}
    beyond = table[table.index > L]
    out["beyond"] = (extreme(beyond["loss_lin/loss_soft - 1"], beyond["se"], "min",
                             df=beyond["df"].to_numpy(), what=f"smallest loss_lin/loss_soft - 1 over L > {L}")
                     if len(beyond) else None)
    G = linearised(kept["linear"], d)[0]  # (R, d, d)
    others = [j for j in range(len(Ls)) if j != jL]
    m_all = len(others) * lin.shape[0]
    q = _quantile(LEVEL, max(m_all, 1))
    vals, los, his = [], [], []
    for r in range(lin.shape[0]):
        for j in others:
            Lj = Ls[j]
            m = float(lin[r, j].mean())
            se = float(lin[r, j].std()) / math.sqrt(lin.shape[-1])
            fixed = est.preconditioned_gd_risk(G[r] * Lj / L, d, Lj, s2, debiased=False)
            adapt = est.preconditioned_gd_risk(G[r], d, Lj, s2, debiased=False)
            f = lambda x, a=adapt, b=fixed: (abs(x - a) - abs(x - b)) / b  # noqa: E731
            lo, hi = interval_image(f, m - q * se, m + q * se, breaks=(adapt, fixed))
            vals.append(f(m)), los.append(lo), his.append(hi)
    out["fixed"] = (_extreme_of_intervals(vals, los, his, "min",
                                          "smallest (|loss - R_adaptive| - |loss - R_fixed|)/R_fixed over runs and L")
                    if vals else None)
    return out, table
