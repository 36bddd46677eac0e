"""The pre-conditioner two-head models learn on anisotropic covariates, against ``Gamma*`` (paper 1, B.3, Figs. 11, 14).

The learned pre-conditioner: linearising the softmax of a two-head model with
``KQ_h[:d, :d] = omega_h Gamma`` and ``OV_h = (0, .., 0, mu_h)`` gives ``y_hat ~ g^T (sum_h mu_h
KQ_h[:d, :d]) x_q`` (paper 1, B.3), so ``sum_h mu_h KQ_h[:d, :d]`` is the model's effective
``Gamma`` (learning rate included); shapes are compared after dividing by ``tr / d``.


* :func:`circuit_table`, :func:`preconditioner_values`, :func:`distance_sweep` -- every model's
  pattern, learned ``Gamma`` and its distances to ``Gamma*``, ``Sigma^{-1}`` and ``I``, across ``rho``;
* :func:`head_split_histories`, :func:`split_floor`, :func:`split_at` -- how far the two heads are
  from the mirror pair along training;
* :func:`scaled_inverse_blocks`, :func:`inverse_distances` -- Figure 14's comparison of the heads'
  KQ blocks with ``Sigma^{-1}``;
* :func:`ov_magnitudes`, :func:`ov_magnitude_estimate`, :func:`ov_magnitude_rival` -- B.3's OV
  magnitudes against the isotropic case, and the ratio ``Gamma*``'s own scale would give;
* :data:`B3_MEDIANS`, :data:`B3_FRACTIONS`, :func:`b3_estimates`, :func:`sweep_estimates` -- chapter
  6's claims of B.3, pooled over the models with ``rho != 0``; :func:`initial_spread_rival`, the
  rival of the heads' common scale.

Used by chapter 6.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...circuits import effective_preconditioner, kq_blocks, omega_of
from ...engine import Run
from ...stats import LEVEL, Estimate, largest, median_ci, proportion_ci
from .runs import pos_neg_runs
from .preconditioner import (
    _sigma,
    band_mean,
    head_split,
    min_eig_sym,
    optimal_preconditioner,
    rel_dist,
    trace_normalise,
)

__all__ = [
    "circuit_table",
    "head_split_histories",
    "split_floor",
    "split_at",
    "preconditioner_values",
    "scaled_inverse_blocks",
    "inverse_distances",
    "distance_sweep",
    "b3_estimates",
    "sweep_estimates",
    "ov_magnitudes",
    "ov_magnitude_estimate",
    "ov_magnitude_rival",
    "initial_spread_rival",
]


# ------------------------------------------------------------------------------- chapter 6: circuits
def circuit_table(runs: Mapping[float, Sequence[Run]]) -> "pandas.DataFrame":  # noqa: F821
    """One row per trained model of ``{rho: runs}``: its pattern (paper 1, Section 3: ``omega_h``,
    ``mu_h``, OV off the label entry, zero-sum, sign matching, spread of ``|omega_h|``), the
    mirror-pair shape distance of :func:`~icl_lib.paper1.anisotropic.preconditioner.head_split`, the
    smallest eigenvalue of the symmetric part of ``sign(mu_h) KQ_h[:d, :d]`` over the heads, the
    distances of the normalised effective pre-conditioner ``Gamma_eff = sum_h mu_h KQ_h[:d, :d]`` to
    ``Gamma*``, ``I_d`` and ``Sigma^{-1}`` (each divided by ``tr / d``), the mean ``(i, i+2)``
    entries of ``Gamma_eff`` and ``Gamma*`` (nan for ``d < 3``) and ``||Gamma_eff - Gamma*||_F /
    ||Gamma*||_F`` unnormalised.  The per-model quantities of chapter 6's claims follow: ``mean
    |mu|`` (over the heads), ``positive definite`` (the smallest eigenvalue above is > 0), the head
    shape distance divided by ``d(Gamma*, I)`` of
    :func:`~icl_lib.paper1.anisotropic.preconditioner.reference_values` (nan when ``Gamma*`` is
    proportional to ``I``), the ``band ratio`` of the learned to ``Gamma*``'s ``(i, i+2)`` entries
    (nan when ``Gamma*`` has none), and the differences of distances ``d(Gamma*) - min(d(Sigma^-1),
    d(I))`` and ``d(Gamma*) - d(I)`` (negative: closer to ``Gamma*``); ``Gamma* scale``, the mean
    diagonal of ``Gamma*`` unnormalised, and ``omega spread at init``, the spread ``(max - min) /
    mean`` of ``|omega_h|`` over every head at the first logged step (the rivals of chapter 6's
    OV-magnitude and same-scale claims).  Paper 1, B.3 and Figure 11; chapter 6."""
    rows = []
    for r, runs_r in runs.items():
        for run in runs_r:
            data, d = run.spec.data, run.d
            S = data.covariance_matrix()  # (d, d)
            G_star = optimal_preconditioner(S, data.L, data.sigma2)  # (d, d)
            G_r = trace_normalise(G_star)
            p = run.pattern(kq_form=False)  # B.3: the KQ block is omega Gamma, not diagonal
            blocks = kq_blocks(run.KQ.double(), d)  # (H, d, d)
            shapes = trace_normalise(blocks)  # each head's block / (tr / d)
            G_eff = effective_preconditioner(run.KQ.double(), run.OV.double(), d)  # sum_h mu_h KQ_h[:d, :d]
            Gn = trace_normalise(G_eff)
            eig = min(min_eig_sym(float(np.sign(p.mu[h])) * blocks[h]) for h in range(blocks.shape[0]))
            d_star_I = float(rel_dist(G_r, torch.eye(d, dtype=torch.float64)))
            shape_dist = float(rel_dist(shapes[0], shapes[1]))
            dists = [float(rel_dist(Gn, ref)) for ref in (G_r, torch.eye(d, dtype=torch.float64),
                                                           trace_normalise(torch.linalg.inv(S)))]
            band_l = float(band_mean(Gn, 2)) if d >= 3 else float("nan")
            band_s = float(band_mean(G_r, 2)) if d >= 3 else float("nan")
            w0 = omega_of(run.history["KQ"][0].double(), d).abs()  # (H,) at the first logged step
            rows.append({
                "rho": r, "seed": run.spec.seed, "pattern": p.kind, "omega": np.round(p.omega, 3).tolist(),
                "mu": np.round(p.mu, 3).tolist(), "OV off-last": p.ov_offlast, "zero-sum": p.zero_sum,
                "sign matched": p.sign_matched, "omega spread": p.omega_spread,
                "head shape distance": shape_dist,
                "min eig sign(mu_h) KQ_h": float(eig),
                "d(Gamma, Gamma*)": dists[0], "d(Gamma, I)": dists[1], "d(Gamma, Sigma^-1)": dists[2],
                "(i,i+2) learned": band_l, "(i,i+2) Gamma*": band_s,
                "|G_eff - Gamma*| / |Gamma*|": float(rel_dist(G_eff, G_star)),
                "mean |mu|": float(np.mean(np.abs(p.mu))), "positive definite": bool(eig > 0),
                "shape / d(Gamma*, I)": shape_dist / d_star_I if d_star_I > 1e-9 else float("nan"),
                "band ratio": band_l / band_s if abs(band_s) > 1e-12 else float("nan"),
                "d(Gamma*) - min(d(Sigma^-1), d(I))": dists[0] - min(dists[1], dists[2]),
                "d(Gamma*) - d(I)": dists[0] - dists[1],
                "Gamma* scale": float(G_star.diagonal().mean()),
                "omega spread at init": float((w0.max() - w0.min()) / w0.mean()),
            })
    return pd.DataFrame(rows)


def head_split_histories(runs: Mapping[float, Sequence[Run]], rho: float) -> dict[float, dict | None]:
    """:func:`~icl_lib.paper1.anisotropic.preconditioner.head_split` along training for the
    positive/negative runs at ``rho = 0`` (when the sweep has it) and at ``rho``: ``{rho: {"step":
    (T,), "spread": (S, T), "shape": (S, T)}}``, or ``None`` for a ``rho`` without such a run
    (chapter 6's mirror-pair figure).  Runs recorded on different grids of steps (the store holds
    runs with 79 and with 373 records of 500,000 steps) are read on the coarsest run's grid, each
    interpolated linearly in the step (exact where the grids share a step)."""
    out = {}
    for r in dict.fromkeys([0.0, rho]) if 0.0 in runs else [rho]:
        kept = pos_neg_runs(runs[r])
        if not kept:
            out[r] = None
            continue
        grid = min((run.history["step"].numpy() for run in kept), key=len)  # (T,)
        series = {"spread": [], "shape": []}
        for run in kept:
            steps = run.history["step"].numpy()
            for key, values in zip(series, head_split(run.history["KQ"], run.d)):
                series[key].append(np.interp(grid, steps, values.numpy()))
        out[r] = {"step": grid, **{key: np.array(v) for key, v in series.items()}}  # (S, T) each
    return out


def split_floor(history: dict | None, tail: float = 0.2) -> float:
    """Median shape distance over the last ``tail`` of training (steps ``>= (1 - tail) T``) of one
    entry of :func:`head_split_histories` (nan for ``None``): the noise floor of the isotropic
    control in chapter 6."""
    if history is None:
        return float("nan")
    last = history["step"] >= (1 - tail) * history["step"][-1]
    return float(np.median(history["shape"][:, last]))


def split_at(history: dict | None, fraction: float) -> float:
    """Median over the seeds of the shape distance at the first logged step ``>= fraction T`` of
    one entry of :func:`head_split_histories` (nan for ``None``): is the mirror pair still forming
    when training stops (chapter 6)?"""
    if history is None:
        return float("nan")
    k = int(np.searchsorted(np.asarray(history["step"]), fraction * history["step"][-1]))
    return float(np.median(history["shape"][:, min(k, len(history["step"]) - 1)]))


def preconditioner_values(pn: "pandas.DataFrame", Gamma_star) -> dict[str, float]:  # noqa: F821
    """Medians over the rows ``pn`` of :func:`circuit_table` (paper 1, B.3 and Figure 11; chapter 6):
    distances ``dG``, ``dS``, ``dI`` of the normalised ``Gamma_eff`` to ``Gamma*``, ``Sigma^{-1}``
    and ``I_d``; ``abs``, the unnormalised ``||Gamma_eff - Gamma*|| / ||Gamma*||``; for ``d >= 3``
    ``band_l``, the learned mean ``(i, i+2)`` entry, and ``band_s``, normalised ``Gamma*``'s."""
    G = torch.as_tensor(Gamma_star, dtype=torch.float64)  # (d, d)
    out = {"dG": float(pn["d(Gamma, Gamma*)"].median()), "dS": float(pn["d(Gamma, Sigma^-1)"].median()),
           "dI": float(pn["d(Gamma, I)"].median()), "abs": float(pn["|G_eff - Gamma*| / |Gamma*|"].median())}
    if G.shape[-1] >= 3:
        out["band_l"] = float(pn["(i,i+2) learned"].median())
        out["band_s"] = float(band_mean(trace_normalise(G), 2))
    return out


def scaled_inverse_blocks(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """``KQ_h[:d, :d]^{-1}`` divided by its mean diagonal, ``(..., H, d, d)`` in float64, from
    ``KQ (..., H, D, D)`` (paper 1, Figure 14; chapter 6)."""
    return trace_normalise(torch.linalg.inv(kq_blocks(KQ.double(), d)))


def inverse_distances(runs: Sequence[Run], Sigma, Gamma_star) -> tuple["pandas.DataFrame", dict]:  # noqa: F821
    """Figure 14's comparison for every head of the positive/negative ``runs``: distances of
    :func:`scaled_inverse_blocks` to ``Sigma`` and to ``Gamma*^{-1} / (tr / d)`` (chapter 6).
    Returns the table (one row per ``(seed, head)``; empty without such runs) and, when it is not
    empty, the medians ``inv_S``, ``inv_G`` and ``inv_cmp``, a phrase saying which is nearer."""
    S = _sigma(Sigma)  # (d, d)
    inv_star = trace_normalise(torch.linalg.inv(torch.as_tensor(Gamma_star, dtype=torch.float64)))
    rows = []
    for run in pos_neg_runs(runs):
        inv = scaled_inverse_blocks(run.KQ, run.d)  # (H, d, d)
        for h in range(inv.shape[0]):
            rows.append({"seed": run.spec.seed, "head": h + 1, "d(inv, Sigma)": float(rel_dist(inv[h], S)),
                         "d(inv, Gamma*^-1)": float(rel_dist(inv[h], inv_star))})
    table = pd.DataFrame(rows)
    if not len(table):
        return table, {}
    med_S, med_G = table["d(inv, Sigma)"].median(), table["d(inv, Gamma*^-1)"].median()
    nearer = "closer" if med_G < med_S else "not closer"
    return table, {"inv_S": float(med_S), "inv_G": float(med_G),
                   "inv_cmp": f"{nearer} to the scaled inverse of Gamma* than to Sigma"}


def distance_sweep(table: "pandas.DataFrame") -> tuple["pandas.DataFrame", dict]:  # noqa: F821
    """Across ``rho`` (paper 1, B.3; chapter 6): medians over the positive/negative rows of
    :func:`circuit_table` of the normalised ``Gamma_eff``'s distances to ``Gamma*``, ``Sigma^{-1}``
    and ``I_d`` per ``rho != 0`` (rows: ``rho``), and ``shape_maxrho``, the median head shape
    distance at the largest ``rho`` (nan without such rows)."""
    pn = table[table.pattern == "pos/neg"]
    shape_maxrho = float(pn[pn.rho == table.rho.max()]["head shape distance"].median())
    cols = ["d(Gamma, Gamma*)", "d(Gamma, Sigma^-1)", "d(Gamma, I)"]
    return pn[pn.rho != 0].groupby("rho")[cols].median(), {"shape_maxrho": shape_maxrho}


# ------------------------------------------------------------------------------- chapter 6: claims
# The statements of paper 1, B.3 are about two-head attention trained on anisotropic covariates,
# not about one rho: chapter 6 tests them on every model of the sweep with rho != 0, pooled.
B3_MEDIANS = ("OV off-last", "zero-sum", "omega spread", "shape / d(Gamma*, I)",
              "d(Gamma*) - min(d(Sigma^-1), d(I))", "band ratio")  # circuit_table columns (medians)
B3_FRACTIONS = ("sign matched", "positive definite")  # boolean circuit_table columns (fractions)


def b3_estimates(table: "pandas.DataFrame", level: float = LEVEL) -> tuple["pandas.DataFrame", dict, dict]:  # noqa: F821
    """Chapter 6's estimates of paper 1, B.3 from :func:`circuit_table`, pooled over the models with
    ``rho != 0``: the fraction of positive/negative models (``"pos/neg"``, Clopper-Pearson), the
    fractions of :data:`B3_FRACTIONS` and the medians of :data:`B3_MEDIANS` (order-statistic
    intervals; nan entries, e.g. the band ratio for ``d < 3``, left out), each on the
    positive/negative models and on all of them.  Returns the summary table (one row per quantity)
    and the two dicts ``{quantity: Estimate}`` (positive/negative models, all models); a quantity
    without a value is absent."""
    aniso = table[table.rho != 0]
    pn = aniso[aniso.pattern == "pos/neg"]
    on_pn, on_all = {}, {}
    if len(aniso):
        on_all["pos/neg"] = proportion_ci(len(pn), len(aniso), level)
    for col in B3_FRACTIONS:
        for rows, out in ((pn, on_pn), (aniso, on_all)):
            if len(rows):
                out[col] = proportion_ci(int(rows[col].astype(bool).sum()), len(rows), level)
    for col in B3_MEDIANS:
        for rows, out in ((pn, on_pn), (aniso, on_all)):
            v = rows[col].dropna().to_numpy(dtype=float) if len(rows) else np.array([])
            if len(v):
                out[col] = median_ci(v, level)
    summary = []
    for q in ("pos/neg", *B3_FRACTIONS, *B3_MEDIANS):
        row = {"quantity": q}
        for name, out in (("pos/neg models", on_pn), ("all models", on_all)):
            e = out.get(q)
            row[name] = "-" if e is None else f"{e:.3g}"
            row[f"n ({name})"] = len(pn) if name == "pos/neg models" else len(aniso)
        summary.append(row)
    return pd.DataFrame(summary).set_index("quantity"), on_pn, on_all


def sweep_estimates(table: "pandas.DataFrame", level: float = LEVEL) -> tuple[Estimate | None, "pandas.DataFrame"]:  # noqa: F821,E501
    """"At every rho != 0 the learned shape is closer to ``Gamma*`` than to ``I``" (chapter 6): per rho,
    the median over all its seeds of ``d(Gamma*) - d(I)`` (:func:`circuit_table`) with its
    order-statistic interval, and their :func:`~icl_lib.stats.largest` (None without a rho != 0).  Returns it and
    the per-rho table (value, lo, hi, seeds)."""
    per = {r: median_ci(g["d(Gamma*) - d(I)"], level) for r, g in table[table.rho != 0].groupby("rho")}
    tab = pd.DataFrame([{"rho": r, "median d(Gamma*) - d(I)": e.value, "lo": e.lo, "hi": e.hi,
                         "seeds": int((table.rho == r).sum())} for r, e in per.items()])
    return (largest({f"rho={r}": e for r, e in per.items()}) if per else None), tab.set_index("rho") if per else tab


def ov_magnitudes(table: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """B.3's "magnitude of the OV circuits ... as in the isotropic case" (chapter 6): for every model
    with ``rho != 0`` whose seed was also trained at ``rho = 0``, the ratio of its ``mean |mu|`` to
    that of the isotropic model of the same seed (same initialisation), and whether both are
    positive/negative.  Empty without ``rho = 0`` in the table."""
    iso = table[table.rho == 0].set_index("seed")
    rows = []
    for _, t in table[table.rho != 0].iterrows():
        if t.seed in iso.index:
            i = iso.loc[t.seed]
            rows.append({"rho": t.rho, "seed": t.seed, "mean |mu|": t["mean |mu|"], "isotropic": i["mean |mu|"],
                         "ratio": t["mean |mu|"] / i["mean |mu|"],
                         "both pos/neg": t.pattern == "pos/neg" and i.pattern == "pos/neg",
                         "Gamma* scale ratio": t["Gamma* scale"] / i["Gamma* scale"]})
    return pd.DataFrame(rows, columns=["rho", "seed", "mean |mu|", "isotropic", "ratio", "both pos/neg",
                                       "Gamma* scale ratio"])


def ov_magnitude_estimate(ratios: "pandas.DataFrame", pos_neg: bool = True, level: float = LEVEL) -> Estimate | None:  # noqa: F821,E501
    """Median of :func:`ov_magnitudes`' ratios with its order-statistic interval, over the pairs whose
    two models are positive/negative (``pos_neg``) or over all pairs; None without pairs."""
    r = ratios[ratios["both pos/neg"]] if pos_neg else ratios
    return median_ci(r["ratio"], level) if len(r) else None


def ov_magnitude_rival(ratios: "pandas.DataFrame", pos_neg: bool = True) -> float | None:  # noqa: F821
    """The rival of :func:`ov_magnitude_estimate`: the median, over the same pairs, of the ratio of
    ``Gamma*``'s own scale (its mean diagonal) at the pair's ``rho`` to that at ``rho = 0``, the
    OV ratio if the OV circuits carried the change of the optimal pre-conditioned step and the KQ
    scale stayed; None without pairs (chapter 6)."""
    r = ratios[ratios["both pos/neg"]] if pos_neg else ratios
    return float(r["Gamma* scale ratio"].median()) if len(r) else None


def initial_spread_rival(table: "pandas.DataFrame") -> float | None:  # noqa: F821
    """The rival of the heads' common scale (chapter 6's ``omega spread``): the median over the
    positive/negative models with ``rho != 0`` of the spread of their heads' ``|omega_h|`` at the
    first logged step, heads as unrelated in scale as at initialisation; None without such models."""
    pn = table[(table.rho != 0) & (table.pattern == "pos/neg")]
    return float(pn["omega spread at init"].median()) if len(pn) else None
