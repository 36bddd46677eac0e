"""The single head against kernel regressors (paper 1, Section 4.3, D.17).

* :func:`kernel_regressor_search` -- the best Nadaraya-Watson bandwidth (``mu = 1``) or the best
  scaled kernel regressor ``mu NW_omega`` (free ``mu``) on a fixed Monte Carlo sample;
* :func:`approx_loss_single_head` -- the minimiser of the approximate loss (4.1) for one head;
* :func:`single_head_vs_kernels` -- chapter 5's comparison of trained single heads with both
  regressors and the approximate loss's optimum, evaluated on fresh sequences.

Used by chapter 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...config import DataConfig
from ...sampling import sample_batch
from ...engine import Run, stack_models
from ...seeding import derive_seed
from ...stats import median_ci
from ...validate import check_float, check_int
from .trained import NAN
from .predictions import paired_losses

__all__ = [
    "SingleHeadValues",
    "kernel_regressor_search",
    "approx_loss_single_head",
    "single_head_vs_kernels",
]


# ----------------------------------------------------------------------------- kernel regressors
@torch.no_grad()
def kernel_regressor_search(
    data: DataConfig,
    free_mu: bool,
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    omega_max: float = 3.0,
    grid: int = 61,
) -> dict[str, float]:
    """Best kernel regressor ``mu sum_i y_i softmax_i(omega x_i^T x_q)`` on one fixed Monte Carlo
    sample of ``n`` sequences: Nadaraya-Watson (``mu = 1``, ``free_mu=False``; paper 1, Section 4.3)
    or with the risk-minimising ``mu(omega) = E[k y_q] / E[k^2]`` (``free_mu=True``; the family of
    a single head of pattern (3.1)).  A grid over ``omega in [0, omega_max]`` then a bounded scalar
    search (``scipy.optimize.minimize_scalar``) around the best grid point.  Returns ``omega``, ``mu``
    and the in-sample risk ``risk_search`` (evaluate the result on a fresh sample).  Chapter 5."""
    from scipy.optimize import minimize_scalar

    n = check_int("n", n, 2)
    omega_max = check_float("omega_max", omega_max, 0.0, lo_open=True)
    b = sample_batch(data, n, seed, L=L)
    g = (b.x @ b.xq[..., None])[..., 0]  # (n, L) x_i^T x_q
    y, yq = b.y[..., 0], b.yq[..., 0]  # (n, L), (n,)

    def fit(omega: float) -> tuple[float, float]:
        k = (torch.softmax(omega * g, dim=-1) * y).sum(-1)  # (n,) NW predictions
        if not free_mu:
            return float(((k - yq) ** 2).mean()), 1.0
        ky, kk = float((k * yq).mean()), float((k * k).mean())
        return float((yq * yq).mean()) - ky * ky / kk, ky / kk

    omegas = np.linspace(0.0, omega_max, check_int("grid", grid, 3))
    risks = [fit(float(w))[0] for w in omegas]
    i = int(np.argmin(risks))
    lo, hi = omegas[max(i - 1, 0)], omegas[min(i + 1, len(omegas) - 1)]
    res = minimize_scalar(lambda w: fit(float(w))[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    omega = float(res.x) if res.fun <= risks[i] else float(omegas[i])
    risk, mu = fit(omega)
    return {"omega": omega, "mu": mu, "risk_search": risk}


# ----------------------------------------------------------------------------- the single head
def _rel_dist(a: float, b: float) -> float:
    """``|a / b - 1|``; infinite when ``b = 0 != a`` (a bandwidth search that ends at 0)."""
    if b == 0:
        return 0.0 if a == 0 else math.inf
    return abs(a / b - 1)


def approx_loss_single_head(d: int, L: int, sigma2: float) -> tuple[float, float]:
    """The minimiser ``(omega*, mu*)`` of the approximate loss (4.1) for one head:
    ``L~ = 1 + s2 - 2 mu omega + mu^2 (omega^2 + (1 + s2) / L exp(d omega^2))`` is smallest at
    ``omega* = 1 / sqrt(d)`` and ``mu* = mu*(omega*) = sqrt(d) / (1 + (1 + s2) e d / L)`` (D.17; the
    single-head reference of the authors' notebooks, and the bandwidth of paper 1, Section 4.3)."""
    d, L, s2 = check_int("d", d, 1), check_int("L", L, 1), check_float("sigma2", sigma2, 0.0)
    return 1 / math.sqrt(d), math.sqrt(d) / (1 + (1 + s2) * math.e * d / L)


@dataclass(frozen=True)
class SingleHeadValues:
    """The numbers :func:`single_head_vs_kernels` reads off one-head models: the best
    Nadaraya-Watson ``omega`` and loss, the heads' median ``|mu|`` and ``|omega|`` (``m1``, ``w1``),
    the best scaled kernel regressor's loss, ``omega`` and ``mu``, the heads' median loss, the
    approximate loss's minimiser, and how many seeds are significantly (``|z| > 3``) better or worse
    than Nadaraya-Watson and worse than the best kernel regressor."""

    nw_omega: float
    m1: float
    w1: float
    nw_loss: float
    kr_loss: float
    kr_omega: float
    kr_mu: float
    single_loss: float
    approx_omega: float
    approx_mu: float
    nw_seeds_better: int
    nw_seeds: int
    nw_seeds_worse: int
    kr_seeds_worse: int


def single_head_vs_kernels(runs: Sequence[Run], data: DataConfig, n: int, seed: int) -> tuple:
    """Trained single heads against kernel regressors (paper 1, Section 4.3): the best
    Nadaraya-Watson (``mu = 1``) and the best scaled kernel regressor (free ``mu``), searched on
    one sample of ``n`` sequences (:func:`kernel_regressor_search`, purpose ``"kernel-search"``)
    and evaluated with every run on a fresh one
    (:func:`~icl_lib.paper1.optimality.predictions.paired_losses`, ``"kernel-eval"``); and the
    minimiser of the approximate loss (4.1), :func:`approx_loss_single_head`.

    Returns ``(table, per_seed, estimates, values)``: the predictors' ``omega``, ``mu``, loss and se
    (the trained heads' medians over seeds); per seed ``|omega|``, ``|mu|``, loss, the relative
    excess loss over the best scaled kernel regressor and the paired ``z`` of the loss difference to
    each regressor; ``estimates``: medians over seeds with order-statistic intervals
    (:func:`~icl_lib.stats.median_ci`) of the excess loss (``"excess"``), of ``|omega| / omega_best``
    (``"omega"``) and of ``|mu| / mu_best`` (``"mu"``), with the rivals' values in the same units
    (``"rival ..."``: Nadaraya-Watson proper and the approximate loss's optimum); ``values``: the
    :class:`SingleHeadValues`.  Without runs: ``None, None, {}`` and NaN (counts 0).  Chapter 5."""
    if not runs:
        return None, None, {}, SingleHeadValues(*[NAN] * 10, 0, 0, 0, 0)
    nw = kernel_regressor_search(data, free_mu=False, n=n, seed=derive_seed(seed, "kernel-search"))
    kr = kernel_regressor_search(data, free_mu=True, n=n, seed=derive_seed(seed, "kernel-search"))
    w_app, m_app = approx_loss_single_head(data.d, data.L, data.sigma2)
    pl = paired_losses(stack_models(runs), data, {
        "NW": lambda b: est.scaled_nw_predict(b, nw["omega"], 1.0),
        "kernel": lambda b: est.scaled_nw_predict(b, kr["omega"], kr["mu"]),
        "approx": lambda b: est.scaled_nw_predict(b, w_app, m_app),
    }, n=n, seed=derive_seed(seed, "kernel-eval"))
    omega = np.array([abs(float(r.omega[0])) for r in runs])  # (R,) |omega| of each single head
    mu = np.array([abs(float(r.mu[0])) for r in runs])
    w1, m1 = float(np.median(omega)), float(np.median(mu))
    loss_kr = float(pl["kernel"]["loss"])
    table = pd.DataFrame([
        {"predictor": "trained single head (median over seeds)", "omega": w1, "mu": m1,
         "ICL loss": float(np.median(pl["model"]["loss"])), "se": float(np.median(pl["model"]["se"]))},
        {"predictor": "best Nadaraya-Watson (mu = 1)", "omega": nw["omega"], "mu": 1.0,
         "ICL loss": float(pl["NW"]["loss"]), "se": float(pl["NW"]["se"])},
        {"predictor": "best scaled kernel regressor (free mu)", "omega": kr["omega"], "mu": kr["mu"],
         "ICL loss": loss_kr, "se": float(pl["kernel"]["se"])},
        {"predictor": "minimiser of the approximate loss (4.1)", "omega": w_app, "mu": m_app,
         "ICL loss": float(pl["approx"]["loss"]), "se": float(pl["approx"]["se"])},
    ]).set_index("predictor")
    excess = pl["kernel"]["diff"] / loss_kr  # (R,) relative excess loss of each head
    z_nw = pl["NW"]["diff"] / pl["NW"]["diff_se"]  # (R,)
    z_kr = pl["kernel"]["diff"] / pl["kernel"]["diff_se"]  # (R,)
    per_seed = pd.DataFrame({"seed": [r.spec.seed for r in runs], "|omega|": omega, "|mu|": mu,
                             "ICL loss": pl["model"]["loss"], "excess over best kernel": excess,
                             "minus best NW (z)": z_nw, "minus best kernel (z)": z_kr}).set_index("seed")
    estimates = {
        "excess": median_ci(excess), "omega": median_ci(omega / kr["omega"]), "mu": median_ci(mu / kr["mu"]),
        "rival excess NW": (float(pl["NW"]["loss"]) - loss_kr) / loss_kr,
        "rival omega approx": w_app / kr["omega"], "rival mu approx": m_app / kr["mu"],
        "rival mu NW": 1.0 / kr["mu"],
    }
    values = SingleHeadValues(
        nw_omega=nw["omega"], m1=m1, w1=w1, nw_loss=float(pl["NW"]["loss"]), kr_loss=loss_kr,
        kr_omega=kr["omega"], kr_mu=kr["mu"], single_loss=float(np.median(pl["model"]["loss"])),
        approx_omega=w_app, approx_mu=m_app, nw_seeds_better=int((z_nw < -3).sum()), nw_seeds=len(z_nw),
        nw_seeds_worse=int((z_nw > 3).sum()), kr_seeds_worse=int((z_kr > 3).sum()))
    return table, per_seed, estimates, values
