"""Prediction-level agreement: trained models against reference predictors on the same sequences (paper 1, Section 4.3).

* :func:`prediction_gaps` -- mean squared difference between a model's predictions and reference
  predictors on the same sequences;
* :func:`paired_losses` -- models' and reference predictors' ICL losses on the same sequences, with
  the paired differences (the single head against the best kernel regressor; chapter 9's losses
  against debiased GD and Bayes);
* :func:`prediction_gap_curves`, :func:`gap_values`, :func:`gap_estimate` -- chapter 5's gaps at
  every ``L``, its glued values and its claim that the models are nearer debiased than vanilla GD.

Used by chapters 5 and 9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...config import DataConfig
from ...sampling import Batch, sample_chunks
from ...engine import Run, stack_models
from ...seeding import derive_seed
from ...stats import Estimate, extreme, paired_ratio
from ...validate import check_int
from .trained import check_lengths

__all__ = [
    "GapValues",
    "prediction_gaps",
    "paired_losses",
    "prediction_gap_curves",
    "gap_values",
    "gap_estimate",
]


# ----------------------------------------------------------------------------- prediction level
@torch.no_grad()
def prediction_gaps(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
    raw: bool = False,
) -> dict:
    """Mean squared difference ``E (y_hat_model - y_hat_ref)^2`` between every model of an ensemble
    and every reference predictor, on the same ``n`` fresh sequences; ``(mean (R,), std error (R,))``
    per reference (``raw=True``: the squared differences themselves, ``(R, n)`` float64 tensors).
    A predictor maps a single-task batch to ``(B,)`` (shared) or ``(R, B)`` (one per model, e.g. GD
    at each model's own rate).  The key ``"target"`` holds the models' own ICL loss.  Paper 1,
    Section 4.3 (the learned predictor is debiased GD); chapter 5."""
    n = check_int("n", n, 2)
    sq: dict[str, list[torch.Tensor]] = {k: [] for k in [*predictors, "target"]}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        pred = model(b)[..., 0]  # (R, B)
        sq["target"].append((pred - b.yq[..., 0]) ** 2)
        for name, p in predictors.items():
            sq[name].append((pred - p(b).to(pred)) ** 2)  # (R, B)
    out = {}
    for name, parts in sq.items():
        e = torch.cat(parts, dim=-1).double()
        out[name] = e if raw else (e.mean(-1).numpy(), (e.std(-1) / math.sqrt(e.shape[-1])).numpy())
    return out


@torch.no_grad()
def paired_losses(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
) -> dict[str, dict[str, np.ndarray]]:
    """ICL losses of every model of an ensemble and of every reference predictor on the same ``n``
    fresh sequences.  Returns ``{"model": {"loss", "se"}}`` (arrays ``(R,)``) and, per predictor,
    ``{"loss", "se", "diff", "diff_se"}`` where ``diff = loss(model) - loss(predictor)`` per model
    with its paired standard error (negative: the model is better).  Chapter 5."""
    n = check_int("n", n, 2)
    err_m: list[torch.Tensor] = []
    err_p: dict[str, list[torch.Tensor]] = {k: [] for k in predictors}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        yq = b.yq[..., 0]  # (B,)
        err_m.append((model(b)[..., 0] - yq) ** 2)  # (R, B)
        for name, p in predictors.items():
            err_p[name].append((p(b).to(yq) - yq) ** 2)  # (B,) or (R, B)
    em = torch.cat(err_m, dim=-1)
    sqrt_n = math.sqrt(em.shape[-1])
    out = {"model": {"loss": em.mean(-1).numpy(), "se": (em.std(-1) / sqrt_n).numpy()}}
    for name, parts in err_p.items():
        ep = torch.cat(parts, dim=-1)
        diff = em - ep  # (R, n)
        out[name] = {"loss": ep.mean(-1).numpy(), "se": (ep.std(-1) / sqrt_n).numpy(),
                     "diff": diff.mean(-1).numpy(), "diff_se": (diff.std(-1) / sqrt_n).numpy()}
    return out


# ----------------------------------------------------------------------------- prediction level (curves)
def prediction_gap_curves(
    runs: Sequence[Run],
    Gamma: torch.Tensor,
    eta: np.ndarray,
    data: DataConfig,
    Ls: Sequence[int],
    n: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Prediction-level agreement (paper 1, Section 4.3): at every ``L``, the mean squared
    difference between every run's predictions and debiased and vanilla GD at its own rate
    ``eta (R,)``, pre-conditioned debiased GD at its own ``Gamma (R, d, d)``, debiased GD at
    ``eta*(L)`` and the Bayes predictor, on ``n`` shared sequences (:func:`prediction_gaps`,
    purpose ``"prediction-gaps"``, index ``j`` of ``L``), with the runs' ICL loss.  Returns the
    medians over runs of the means and of their standard errors, ``(len(Ls), 6)`` each, index
    ``L`` (chapter 5)."""
    model = stack_models(runs)
    d, s2, R = data.d, data.sigma2, len(runs)

    def per_run(fn):
        return lambda b: torch.stack([fn(b, r) for r in range(R)])  # (R, B)

    refs = {
        "debiased GD (own eta)": per_run(lambda b, r: est.debiased_gd_predict(b, float(eta[r]))),
        "vanilla GD (own eta)": per_run(lambda b, r: est.vanilla_gd_predict(b, float(eta[r]))),
        "pre-cond. debiased GD (own Gamma)":
            per_run(lambda b, r: est.debiased_gd_predict(b, 1.0, Gamma[r])),
        "debiased GD, eta*(L)":
            lambda b: est.debiased_gd_predict(b, est.optimal_eta_debiased(d, b.L, s2)),
        "Bayes": lambda b: est.ridge_predict(b, s2 * d),
    }
    Ls = check_lengths(Ls)
    gap = {k: [] for k in [*refs, "target"]}
    gap_se = {k: [] for k in gap}
    for j, Lj in enumerate(Ls):
        g = prediction_gaps(model, data, refs, n=n, seed=derive_seed(seed, "prediction-gaps", j), L=Lj)
        for k, (m, se) in g.items():
            gap[k].append(float(np.median(m)))
            gap_se[k].append(float(np.median(se)))
    index = pd.Index(Ls, name="L")
    rename = {"target": "ICL loss"}
    return (pd.DataFrame(gap, index=index).rename(columns=rename),
            pd.DataFrame(gap_se, index=index).rename(columns=rename))


@dataclass(frozen=True)
class GapValues:
    """What :func:`gap_values` reads off :func:`prediction_gap_curves`: the ratio gap(debiased GD) /
    gap(vanilla GD) at the shortest length ``L_small`` of the grid, and the gaps of debiased GD,
    preconditioned debiased GD and Bayes at the training length."""

    ratio_smallL: float
    dgd_Ltrain: float
    pdgd_Ltrain: float
    bayes_Ltrain: float
    L_small: int


def gap_values(gaps: pd.DataFrame, L: int) -> GapValues:
    """The :class:`GapValues` of :func:`prediction_gap_curves` (training length ``L``; chapter 5)."""
    dgd, gd = gaps["debiased GD (own eta)"], gaps["vanilla GD (own eta)"]
    L0 = int(gaps.index[0])
    return GapValues(ratio_smallL=float(dgd[L0]) / float(gd[L0]), dgd_Ltrain=float(dgd[L]),
                     pdgd_Ltrain=float(gaps.at[L, "pre-cond. debiased GD (own Gamma)"]),
                     bayes_Ltrain=float(gaps.at[L, "Bayes"]), L_small=L0)


def gap_estimate(
    runs: Sequence[Run], eta: np.ndarray, data: DataConfig, Ls: Sequence[int], n: int, seed: int
) -> Estimate | None:
    """The largest, over every run and every ``L' <= L_train // 2`` of the grid ``Ls``, of the ratio
    gap(debiased GD) / gap(vanilla GD) of mean squared prediction differences at the run's own rate
    ``eta (R,)`` (paired on the sequences of :func:`prediction_gap_curves`, purpose
    ``"prediction-gaps"``, index ``j`` of ``L'`` in ``Ls``; delta-method errors, Bonferroni).
    Below 1: every model is nearer debiased than vanilla GD at short contexts (paper 1, Section 4.3).
    ``None`` without such an ``L'``.  Chapter 5."""
    Ls = check_lengths(Ls)
    small = [(j, Lj) for j, Lj in enumerate(Ls) if Lj <= data.L // 2]
    if not small or not runs:
        return None
    model, R = stack_models(runs), len(runs)
    refs = {"dGD": lambda b: torch.stack([est.debiased_gd_predict(b, float(eta[r])) for r in range(R)]),
            "GD": lambda b: torch.stack([est.vanilla_gd_predict(b, float(eta[r])) for r in range(R)])}
    vals, ses = [], []
    for j, Lj in small:
        g = prediction_gaps(model, data, refs, n=n, seed=derive_seed(seed, "prediction-gaps", j), L=Lj, raw=True)
        rel, se = paired_ratio(g["dGD"].numpy(), g["GD"].numpy())  # (R,) each
        vals.extend(rel + 1), ses.extend(se)
    return extreme(vals, ses, "max", what=f"largest gap(dGD)/gap(GD) of {R} models at L <= {data.L // 2}")
