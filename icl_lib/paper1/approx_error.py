"""Proposition 4.1's approximation error against the context length L (paper 1, Section 4.1).

Proposition 4.1 approximates the ICL loss of H heads in the form (3.1) by (4.1) up to an error
that vanishes as L grows.  At a small KQ scale the two losses differ by a term of order 1/L: two
symmetric heads with ``eta = 2 m w`` are debiased GD with step ``eta`` as ``w -> 0`` (Section
4.3), whose exact risk exceeds (4.1) by ``(eta / L) (2 - eta (1 + c d))`` with ``c = (1 +
sigma2) / L``, which is ``s* / L`` on the valley floor (chapter 3).  :func:`error_by_length`
measures ``true - (4.1)`` by Monte Carlo on the valley floor of (4.1) at one small ``w`` for
several ``L``, and :func:`order_in_length` the order ``p`` of ``error ~ L^p`` between the shortest
and the longest context (the rival: an error that does not vanish with L, ``p = 0``, or vanishes
only as ``1 / sqrt(L)``).  Chapter 3.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..config import DataConfig
from ..seeding import derive_seed
from ..stats import LEVEL, Estimate
from ..validate import check_float, check_int, check_int_list
from .approx_loss import ApproxLossConfig, approx_loss, mu_star
from .dynamics.landscape import symmetric_two_head, true_loss_cv

__all__ = ["error_by_length", "order_in_length"]


def error_by_length(Ls: Sequence[int], d: int, sigma2: float, w: float, n: int, seed: int) -> pd.DataFrame:
    """For each ``L`` of ``Ls``: two symmetric heads ``omega = (w, -w)`` on the valley floor of
    (4.1), ``mu = mu*(omega)`` (eq. D.17), their true ICL loss by Monte Carlo on ``n`` sequences
    with debiased GD as control variate (:func:`~icl_lib.paper1.dynamics.landscape.true_loss_cv`), its
    standard error, (4.1), and ``diff = true - (4.1)``, with the small-``w`` prediction ``s*/L``
    beside it.  One row per ``L``.  Chapter 3 (Proposition 4.1)."""
    Ls = check_int_list("Ls", Ls, 2, 4096, max_len=12)
    d = check_int("d", d, 1, 64)
    w = check_float("w", w, 0.0, 1.0, lo_open=True)
    rows = []
    for L in Ls:
        cfg = ApproxLossConfig(d=d, L=L, sigma2=sigma2)
        omega = symmetric_two_head(np.array([w]), 0.0)[0]  # (1, 2)
        mu = mu_star(omega, cfg)  # (1, 2)
        true, se = true_loss_cv(omega, mu, DataConfig(d=d, L=L, sigma2=sigma2), n=n,
                                seed=derive_seed(seed, f"approx-error-L{L}"))
        approx = float(approx_loss(mu, omega, cfg)[0])
        rows.append({"L": L, "true (MC)": float(true[0]), "se": float(se[0]), "(4.1)": approx,
                     "diff": float(true[0]) - approx, "s*/L": cfg.s_star / L})
    return pd.DataFrame(rows)


def order_in_length(table: pd.DataFrame, level: float = LEVEL) -> Estimate:
    """The order ``p`` of ``diff ~ L^p`` between the shortest and the longest ``L`` of
    :func:`error_by_length`'s table, ``log(diff_max / diff_min) / log(L_max / L_min)``, with the
    interval from the two differences' normal intervals at level ``(1 + level) / 2`` each (union
    bound); unbounded where an interval reaches 0.  Chapter 3 (Proposition 4.1)."""
    if len(table) < 2:
        return Estimate(math.nan, -math.inf, math.inf, level, "fewer than two lengths")
    z = float(sps.norm.ppf(0.5 + (1 + level) / 4))
    a, b = table.iloc[0], table.iloc[-1]
    span = math.log(b["L"] / a["L"])
    lo_a, hi_a = a["diff"] - z * a["se"], a["diff"] + z * a["se"]
    lo_b, hi_b = b["diff"] - z * b["se"], b["diff"] + z * b["se"]
    value = math.log(b["diff"] / a["diff"]) / span if a["diff"] > 0 and b["diff"] > 0 else math.nan
    if min(lo_a, lo_b) <= 0:
        return Estimate(value, -math.inf, math.inf, level, "an error's interval reaches 0")
    return Estimate(value, math.log(lo_b / hi_a) / span, math.log(hi_b / lo_a) / span, level,
                    f"log ratio of the errors at L = {int(b['L'])} and {int(a['L'])}, two normal intervals")
