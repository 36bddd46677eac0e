"""The trained models' ICL loss against pre-conditioned and plain GD on anisotropic covariates (paper 1, B.3, G.4).

* :func:`length_losses` -- the models' loss at every context length against GD pre-conditioned by
  ``Gamma*`` and plain GD at its best step;
* :func:`rho_sweep_losses`, :func:`loss_summary` -- every model at its training length on test prompts
  shared with the references (paired gaps), per ``rho``;
* :func:`loss_estimates` -- chapter 6's two loss claims (medians over seeds widened by the test-set
  error, the largest over ``rho``), and :func:`plain_gd_rival`, the rival of the first.

Used by chapter 6.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...circuits import effective_preconditioner
from ...config import DataConfig
from ...sampling import sample_chunks
from ...engine import Run, stack_models
from ...estimators import bayes_risk_mc, debiased_gd_predict, model_risk
from ...seeding import derive_seed
from ...stats import LEVEL, largest, seed_median_ci
from ...validate import check_int
from .preconditioner import optimal_eta, optimal_pgd_risk, optimal_preconditioner, pgd_risk

__all__ = [
    "length_losses",
    "rho_sweep_losses",
    "loss_summary",
    "loss_estimates",
    "plain_gd_rival",
]


# ------------------------------------------------------------------------------- chapter 6: losses
def length_losses(
    runs: Sequence[Run], data: DataConfig, Ls: Sequence[int], n: int, seed: int
) -> "pandas.DataFrame":  # noqa: F821
    """ICL loss of the models ``runs`` (trained on ``data``) at every context length of ``Ls``, on
    ``n`` shared test prompts per length (stream ``"test-loss"``), against pre-conditioned debiased
    GD with ``Gamma*(L)`` and with the models' own ``Gamma_eff`` (median over models; closed forms),
    debiased GD with its best step ``eta*(L)`` and the Bayes posterior mean (Monte Carlo, stream
    ``"mc-bayes"``).  Paper 1, B.3; chapter 6.  Rows: ``L``; ``model`` is the median over the models,
    ``model lo`` / ``model hi`` their smallest and largest loss, ``test-set se`` the largest standard
    error of one model's loss on the ``n`` prompts."""
    Sigma, d, s2 = data.covariance_matrix(), data.d, data.sigma2  # (d, d)
    models = stack_models(runs)
    G_effs = [effective_preconditioner(run.KQ.double(), run.OV.double(), d) for run in runs]  # each (d, d)
    cols = ["model", "model lo", "model hi", "test-set se", "PGD, Gamma*(L)", "PGD, learned Gamma_eff",
            "debiased GD, eta*(L)", "Bayes (ridge, MC)"]
    curves = {c: [] for c in cols}
    for Lk in Ls:
        risk, se = model_risk(models, data, n=n, seed=derive_seed(seed, "test-loss", Lk), L=Lk)  # (R,), (R,)
        eta = optimal_eta(Sigma, Lk, s2)
        values = [float(risk.median()), float(risk.min()), float(risk.max()), float(se.max()),
                  optimal_pgd_risk(Sigma, Lk, s2),
                  float(np.median([pgd_risk(G, Sigma, Lk, s2) for G in G_effs])),
                  pgd_risk(eta * torch.eye(d, dtype=torch.float64), Sigma, Lk, s2),
                  bayes_risk_mc(data, n=n, seed=derive_seed(seed, "mc-bayes", Lk), L=Lk)[0]]
        for c, v in zip(cols, values):
            curves[c].append(v)
    return pd.DataFrame(curves, index=pd.Index(list(Ls), name="L"))


@torch.no_grad()
def rho_sweep_losses(runs: Mapping[float, Sequence[Run]], n: int, seed: int, chunk: int = 5_000) -> "pandas.DataFrame":  # noqa: F821,E501
    """Every model of ``{rho: runs}`` at its training length on ``n`` test prompts shared by the
    models of one ``rho`` (stream ``"test-loss-rho"``), paired with two predictors on the same prompts:
    pre-conditioned debiased GD with ``Gamma*`` and plain debiased GD with its best step ``eta*``
    (paper 1, B.3; chapter 6).  One row per model: ``rho``, ``seed``, ``pattern``, ``loss`` and its
    test-set ``se``, and for each reference ``gap <ref>`` = mean(model error - reference error) /
    R_ref (``R_ref`` the closed-form risk) with its paired ``gap <ref> se``; ``R_PGD(Gamma*)`` and
    ``R_dGD(eta*)`` are the closed forms."""
    rows = []
    for r, runs_r in runs.items():
        data = runs_r[0].spec.data
        S, L, s2 = data.covariance_matrix(), data.L, data.sigma2  # (d, d)
        eye = torch.eye(data.d, dtype=torch.float64)
        refs = {"PGD": optimal_preconditioner(S, L, s2), "dGD": optimal_eta(S, L, s2) * eye}
        closed = {"PGD": optimal_pgd_risk(S, L, s2), "dGD": pgd_risk(refs["dGD"], S, L, s2)}
        model = stack_models(runs_r)
        e_m, e_r = [], {k: [] for k in refs}
        for b in sample_chunks(data, check_int("n", n, 2), derive_seed(seed, "test-loss-rho"), chunk):
            e_m.append(((model(b) - b.yq) ** 2).mean(-1))  # (R, B)
            for k, G in refs.items():
                e_r[k].append((debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2)  # (B,)
        e = torch.cat(e_m, 1)  # (R, n)
        root = np.sqrt(e.shape[1])
        for i, run in enumerate(runs_r):
            row = {"rho": r, "seed": run.spec.seed, "pattern": run.pattern(kq_form=False).kind, "loss": float(e[i].mean()),
                   "se": float(e[i].std() / root)}
            for k in refs:
                diff = e[i] - torch.cat(e_r[k])
                row[f"gap {k}"] = float(diff.mean()) / closed[k]
                row[f"gap {k} se"] = float(diff.std() / root) / closed[k]
            row["R_PGD(Gamma*)"], row["R_dGD(eta*)"] = closed["PGD"], closed["dGD"]
            rows.append(row)
    return pd.DataFrame(rows)


def loss_summary(losses: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """Per ``rho`` (rows) from :func:`rho_sweep_losses`: the number of positive/negative seeds, the
    median loss over them and over all seeds, the largest test-set se of a model, the closed-form
    references and the median paired gaps (positive/negative seeds).  Chapter 6's loss table."""
    out = []
    for r, g in losses.groupby("rho", sort=False):
        pn = g[g.pattern == "pos/neg"]
        nan = float("nan")
        out.append({"rho": r, "pos/neg seeds": len(pn),
                    "median loss (pos/neg)": float(pn["loss"].median()) if len(pn) else nan,
                    "median loss (all)": float(g["loss"].median()), "test-set se (max)": float(g["se"].max()),
                    "R_PGD(Gamma*)": float(g["R_PGD(Gamma*)"].iloc[0]), "R_dGD(eta*)": float(g["R_dGD(eta*)"].iloc[0]),
                    "gap PGD (pos/neg)": float(pn["gap PGD"].median()) if len(pn) else nan,
                    "gap dGD (pos/neg)": float(pn["gap dGD"].median()) if len(pn) else nan})
    return pd.DataFrame(out).set_index("rho")


def loss_estimates(losses: "pandas.DataFrame", min_rho: float = 0.5, level: float = LEVEL) -> dict:  # noqa: F821
    """Chapter 6's two loss claims from :func:`rho_sweep_losses` (paper 1, B.3), each the median over
    seeds of the paired gaps with :func:`~icl_lib.stats.seed_median_ci` (widened by the test-set error):
    ``"PGD"`` on the positive/negative models with ``rho != 0`` (pooled) and ``"PGD (all)"`` on all
    of them; ``"dGD"`` per ``rho >= min_rho`` on its positive/negative models, combined by
    :func:`~icl_lib.stats.largest` ("at every such rho"), and ``"dGD (all)"`` the same on all seeds.  A key is
    absent where its models are."""
    aniso = losses[losses.rho != 0]
    out = {}
    for key, rows in (("PGD", aniso[aniso.pattern == "pos/neg"]), ("PGD (all)", aniso)):
        if len(rows):
            out[key] = seed_median_ci(rows["gap PGD"], rows["gap PGD se"], level)
    big = losses[losses.rho >= min_rho]
    for key, pn_only in (("dGD", True), ("dGD (all)", False)):
        per = {}
        for r, g in big.groupby("rho"):
            g = g[g.pattern == "pos/neg"] if pn_only else g
            if len(g):
                per[f"rho={r}"] = seed_median_ci(g["gap dGD"], g["gap dGD se"], level)
        if per:
            out[key] = largest(per)
    return out


def plain_gd_rival(losses: "pandas.DataFrame") -> float | None:  # noqa: F821
    """The rival of :func:`loss_estimates`' ``"PGD"``: the median gap to pre-conditioned debiased GD
    with ``Gamma*`` that the same positive/negative models with ``rho != 0`` would have if they were
    plain debiased GD at its best step, ``R_dGD(eta*) / R_PGD(Gamma*) - 1`` at each model's ``rho``
    (closed forms); None without such models.  Paper 1, B.3; chapter 6."""
    pn = losses[(losses.rho != 0) & (losses.pattern == "pos/neg")]
    if not len(pn):
        return None
    return float((pn["R_dGD(eta*)"] / pn["R_PGD(Gamma*)"] - 1).median())
