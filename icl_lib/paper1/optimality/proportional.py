"""Theorem 4.2 (iii): optimal debiased GD against the Bayes risk in the proportional regime (paper 1, F.3).

* :func:`bayes_ratio_grid`, :func:`ratio_limits`, :func:`sup_ratio_limit` -- optimal debiased GD
  risk over the Bayes risk at finite ``d`` and in the proportional limit;
* :func:`ratio_values`, :func:`bayes_limit_estimate` -- chapter 5's glued values and its claim on
  the finite-size ratio against the limit;
* :func:`proportional_specs`, :func:`proportional_table`,
  :func:`proportional_estimate` -- two-head models trained in the proportional regime against the
  optimal debiased GD risk (Theorem 4.2 (ii)-(iii)).

Used by chapter 5 and by the book's training plan (:mod:`icl_lib.book.plan`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ... import estimators as est
from ...config import DataConfig, RunSpec, TrainConfig
from ...engine import Run, stack_models
from ...seeding import derive_seed
from ...stats import Estimate, extreme
from ...validate import check_float, check_int
from ..sweeps import heads_sweep_specs
from .lengths import length_errors

__all__ = [
    "RatioValues",
    "bayes_ratio_grid",
    "ratio_limits",
    "sup_ratio_limit",
    "ratio_values",
    "bayes_limit_estimate",
    "proportional_specs",
    "proportional_table",
    "proportional_estimate",
]


# ----------------------------------------------------------------------------- Theorem 4.2 (iii)
def bayes_ratio_grid(xis: Sequence[float], sigma2s: Sequence[float], d: int, n: int = 200, seed: int = 0):
    """Risk of debiased GD at its optimal step over the Bayes risk, at ``d`` and ``L = round(d / xi)``
    for every ``(xi, sigma2)``, with both proportional limits at ``xi = d / L`` (paper 1, Theorem 4.2
    (iii); chapter 5).  Returns a :class:`pandas.DataFrame` (one row per grid point)."""
    d = check_int("d", d, 1)
    rows = []
    for s2 in sigma2s:
        for xi in xis:
            xi = check_float("xi", xi, 0.0, lo_open=True)
            L = max(2, round(d / xi))
            xi_eff = d / L
            r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
            r_b, se_b = est.bayes_risk(d, L, s2, n=n, seed=derive_seed(seed, "bayes-grid", len(rows)))
            lim_dgd, lim_b = est.gd_risk_proportional(xi_eff, s2), est.bayes_risk_proportional(xi_eff, s2)
            rows.append({"xi": xi_eff, "sigma2": s2, "d": d, "L": L, "R_dGD*": r_dgd, "R_Bayes": r_b,
                         "R_Bayes se": se_b, "ratio": r_dgd / r_b, "R_dGD* limit": lim_dgd,
                         "R_Bayes limit": lim_b, "ratio limit": lim_dgd / lim_b})
    return pd.DataFrame(rows)


def ratio_limits(xis: Sequence[float], sigma2s: Sequence[float], points: int = 200) -> pd.DataFrame:
    """Proportional limit of ``R_dGD(eta*) / R_Bayes`` on ``points`` log-spaced ``xi`` spanning
    ``xis`` (0.3 decades beyond each end): ``(points, len(sigma2s))``, index ``xi``, one column per
    noise level (paper 1, Theorem 4.2 (iii); the lines of chapter 5's ratio figure)."""
    points = check_int("points", points, 2)
    xi = np.logspace(np.log10(min(xis)) - 0.3, np.log10(max(xis)) + 0.3, points)
    cols = {s2: [est.gd_risk_proportional(x, s2) / est.bayes_risk_proportional(x, s2) for x in xi]
            for s2 in sigma2s}
    return pd.DataFrame(cols, index=pd.Index(xi, name="xi"))


def sup_ratio_limit(sigma2: float, points: int = 2001) -> float:
    """``sup_xi`` of the proportional limit of ``R_dGD(eta*) / R_Bayes`` at noise ``sigma2``, over
    ``points`` log-spaced ``xi in [1e-3, 1e3]`` (paper 1, Theorem 4.2 (iii); chapter 5)."""
    sigma2 = check_float("sigma2", sigma2, 0.0, lo_open=True)
    return max(est.gd_risk_proportional(x, sigma2) / est.bayes_risk_proportional(x, sigma2)
               for x in np.logspace(-3, 3, check_int("points", points, 2)))


@dataclass(frozen=True)
class RatioValues:
    """What :func:`ratio_values` reads off a :func:`bayes_ratio_grid` table: the largest
    finite-size ratio, the largest noise level and its largest ratio, and the exact ratio at the
    chapter's own ``(d, L, sigma2)``."""

    rmax: float
    s2_top: float
    ratio_top: float
    ratio_book: float


def ratio_values(ratio_df: pd.DataFrame, data: DataConfig, bayes: float) -> RatioValues:
    """The :class:`RatioValues` of a :func:`bayes_ratio_grid` table; the ratio at ``data`` is
    ``R_dGD(eta*) / bayes`` (``bayes``: the Bayes risk of
    :func:`~icl_lib.paper1.optimality.risks.closed_form_checks`).  Paper 1, Theorem 4.2 (iii)."""
    s2_top = float(ratio_df["sigma2"].max())
    d, L, s2 = data.d, data.L, data.sigma2
    return RatioValues(
        rmax=float(ratio_df["ratio"].max()), s2_top=s2_top,
        ratio_top=float(ratio_df[ratio_df.sigma2 == s2_top]["ratio"].max()),
        ratio_book=est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2) / float(bayes))


def bayes_limit_estimate(ratio_df: pd.DataFrame) -> Estimate:
    """Largest ``|ratio / limit - 1|`` over a :func:`bayes_ratio_grid` table: the finite-size ratio
    of exact optimal debiased GD risk over the Monte Carlo Bayes risk against the proportional limit
    of both (paper 1, F.3), with the Bayes risk's Monte Carlo error (Bonferroni over the grid)."""
    dev = ratio_df["ratio"] / ratio_df["ratio limit"] - 1
    se = ratio_df["ratio"] * ratio_df["R_Bayes se"] / ratio_df["R_Bayes"] / ratio_df["ratio limit"]
    return extreme(dev.to_numpy(), se.to_numpy(), "absmax", what=f"largest |ratio/limit - 1| of {len(dev)} grid points")


def proportional_specs(
    d: int, xis: Sequence[float], seeds: int, seed: int, sigma2: float, train_cfg: TrainConfig
) -> list[RunSpec]:
    """Two-head softmax models in the proportional regime: for every ``xi`` of ``xis``, ``seeds`` runs
    (seeds ``seed, seed + 1, ...``) at dimension ``d`` and context length ``L = max(2, round(d / xi))``,
    ordered by ``xi`` (paper 1, Theorem 4.2 (iii); chapter 5)."""
    d = check_int("d", d, 1)
    return [s for xi in xis
            for s in heads_sweep_specs(2, seeds, seed, DataConfig(d=d, L=max(2, round(d / xi)), sigma2=sigma2),
                                       train_cfg)]


def proportional_table(runs: Mapping[float, Sequence[Run]], n: int, seed: int, n_bayes: int = 4000) -> pd.DataFrame:
    """Trained models in the proportional regime against Theorem 4.2 (iii): per ``xi`` of ``runs``
    (the runs of :func:`proportional_specs`), the models' mean loss over seeds on ``n`` shared sequences
    (purpose ``"proportional-test"``, index ``j`` of ``xi``) with its error (the test set's and the
    spread over seeds, :func:`~icl_lib.stats.seed_ratio`'s rule) and degrees of freedom (seeds - 1), the exact
    optimal debiased GD risk ``R_dGD*`` at that ``(d, L)``, the Bayes risk (``n_bayes`` designs,
    ``"proportional-bayes"``), the ratios ``loss / R_dGD* - 1`` and ``loss / R_Bayes`` with errors,
    ``R_dGD* / R_Bayes`` and its proportional limit at ``xi = d / L``, vanilla GD's optimal risk
    relative to ``R_dGD*`` (``R_GD*/R_dGD* - 1``, the rival of reaching ``R_dGD*``), and how many
    runs ended in the positive/negative pattern.  One row per ``xi`` (chapter 5)."""
    rows = []
    for j, (xi, rs) in enumerate(runs.items()):
        data = rs[0].spec.data
        d, L, s2 = data.d, data.L, data.sigma2
        e = length_errors(stack_models(rs), data, [L], n, 1, derive_seed(seed, "proportional-test", j))[:, 0]
        R = e.shape[0]
        per_model = e.mean(-1)  # (R,)
        mean = float(e.mean())
        var = float(e.mean(0).var()) / e.shape[-1] + (float(per_model.var()) / R if R > 1 else 0.0)
        se = math.sqrt(var)
        r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
        r_b, se_b = est.bayes_risk(d, L, s2, n=n_bayes, seed=derive_seed(seed, "proportional-bayes", j))
        ratio_b = mean / r_b
        rows.append({"xi": d / L, "d": d, "L": L, "pos/neg": sum(r.pattern().kind == "pos/neg" for r in rs),
                     "seeds": R, "loss": mean, "loss se": se, "df": R - 1 if R > 1 else np.nan,
                     "R_dGD*": r_dgd, "R_Bayes": r_b, "R_Bayes se": se_b,
                     "loss/R_dGD* - 1": mean / r_dgd - 1, "se (vs R_dGD*)": se / r_dgd,
                     "loss/R_Bayes": ratio_b, "se (vs R_Bayes)": ratio_b * math.hypot(se / mean, se_b / r_b),
                     "R_dGD*/R_Bayes": r_dgd / r_b,
                     "R_GD*/R_dGD* - 1": est.vanilla_gd_risk(est.optimal_eta_vanilla(d, L, s2), d, L, s2) / r_dgd - 1,
                     "limit ratio": est.gd_risk_proportional(d / L, s2) / est.bayes_risk_proportional(d / L, s2)})
    return pd.DataFrame(rows).set_index("xi")


def proportional_estimate(table: pd.DataFrame) -> Estimate:
    """Largest ``|loss / R_dGD* - 1|`` over the ``xi`` of a :func:`proportional_table`, t intervals
    (seeds - 1 degrees of freedom; normal with one seed), Bonferroni over ``xi``: the trained
    models against the optimal debiased GD risk (paper 1, Theorem 4.2 (ii)-(iii); chapter 5)."""
    df = table["df"].to_numpy(dtype=float)
    return extreme(table["loss/R_dGD* - 1"].to_numpy(), table["se (vs R_dGD*)"].to_numpy(), "absmax", df=df,
                   what=f"largest |loss/R_dGD* - 1| of {len(table)} xi, mean over seeds")
