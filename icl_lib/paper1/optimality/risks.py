"""Exact risks chapter 5 compares trained models with (paper 1, Section 4.3, Figure 3, Appendix F).

* :func:`reference_curves` -- the risks of vanilla GD and debiased GD at a given step, of debiased
  GD at its optimal step ``eta*(L)``, and the Bayes risk, at every ``L`` (Figure 3);
* :func:`closed_form_checks` -- the exact risks of vanilla, debiased and pre-conditioned GD and the
  design-only Bayes risk against plain Monte Carlo (Appendix F);
* :func:`off_diagonal_mass` -- how far a learned pre-conditioner is from a scaled identity's shape.

Used by chapter 5.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...config import DataConfig
from ...seeding import derive_seed
from .trained import check_lengths

__all__ = [
    "reference_curves",
    "closed_form_checks",
    "off_diagonal_mass",
]


def reference_curves(
    eta: float, d: int, Ls: Sequence[int], sigma2: float, n_bayes: int = 2000, seed: int = 0
) -> dict[str, np.ndarray]:
    """Exact risks at every ``L``: vanilla GD and debiased GD at step ``eta`` (the learned rate),
    debiased GD at its optimal step ``eta*(L)``, and the Bayes risk (design-only Monte Carlo, its
    standard error under ``"Bayes se"``).  Paper 1, Figure 3; chapter 5."""
    Ls = check_lengths(Ls)
    bayes = [est.bayes_risk(d, L, sigma2, n=n_bayes, seed=derive_seed(seed, "bayes-at-L", j)) for j, L in enumerate(Ls)]
    return {
        "vanilla GD": np.array([est.vanilla_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD": np.array([est.debiased_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD, eta*(L)": np.array(
            [est.debiased_gd_risk(est.optimal_eta_debiased(d, L, sigma2), d, L, sigma2) for L in Ls]
        ),
        "Bayes": np.array([b[0] for b in bayes]),
        "Bayes se": np.array([b[1] for b in bayes]),
    }


# ----------------------------------------------------------------------------- exact risks
def closed_form_checks(
    Gamma: torch.Tensor, eta: float, data: DataConfig, n: int, seed: int, n_bayes: int = 4000
) -> pd.DataFrame:
    """The exact risks of vanilla and debiased GD at step ``eta`` and pre-conditioned by ``Gamma``
    ``(d, d)``, against plain Monte Carlo on ``n`` sequences each (purpose ``"mc-check"``, one
    index per predictor); and the design-only Bayes risk (``n_bayes`` designs, ``"bayes-design"``)
    against the full Monte Carlo of the posterior mean (``"mc-bayes"``).  Paper 1, Section 4.3,
    Appendix F; chapter 5.  One row per predictor: closed form, Monte Carlo, se, and
    ``z = (MC - closed) / se`` (for Bayes with both standard errors)."""
    d, L, s2 = data.d, data.L, data.sigma2
    checks = {
        "vanilla GD, eta": (est.vanilla_gd_risk(eta, d, L, s2),
                            lambda b: est.vanilla_gd_predict(b, eta)),
        "debiased GD, eta": (est.debiased_gd_risk(eta, d, L, s2),
                             lambda b: est.debiased_gd_predict(b, eta)),
        "pre-cond. GD, Gamma": (est.preconditioned_gd_risk(Gamma, d, L, s2, debiased=False),
                                lambda b: est.vanilla_gd_predict(b, 1.0, Gamma)),
        "pre-cond. debiased GD, Gamma": (est.preconditioned_gd_risk(Gamma, d, L, s2),
                                         lambda b: est.debiased_gd_predict(b, 1.0, Gamma)),
    }
    rows = []
    for k, (name, (closed, predict)) in enumerate(checks.items()):
        m, se = est.mc_risk(predict, data, n=n, seed=derive_seed(seed, "mc-check", k))
        rows.append({"predictor": name, "closed form": closed, "Monte Carlo": m, "se": se,
                     "z": (m - closed) / se})
    bayes_x, bayes_x_se = est.bayes_risk(d, L, s2, n=n_bayes, seed=derive_seed(seed, "bayes-design"))
    bayes_full, bayes_full_se = est.bayes_risk_mc(data, n=n, seed=derive_seed(seed, "mc-bayes"))
    rows.append({"predictor": "Bayes (design-only MC vs full MC)", "closed form": bayes_x,
                 "Monte Carlo": bayes_full, "se": bayes_full_se,
                 "z": (bayes_full - bayes_x) / np.hypot(bayes_full_se, bayes_x_se)})
    return pd.DataFrame(rows).set_index("predictor")


def off_diagonal_mass(Gamma: torch.Tensor) -> float:
    """``||Gamma - diag(Gamma)|| / ||diag(Gamma)||`` (Frobenius) of one ``(d, d)`` pre-conditioner:
    how far a learned ``Gamma`` is from a scaled identity's shape (chapter 5)."""
    diag = torch.diagonal(Gamma)  # (d,)
    return float((Gamma - torch.diag(diag)).norm() / diag.norm())
