"""Figures of what trained models compute (paper 1, Section 4.3, Theorem 4.2, B.1, B.2; chapter 5).

* :func:`linearisation_plot`   -- the error of the linearised predictor against ``omega`` for
  hand-set paired and unequal heads, with the trained models as points (Theorem 4.2 (i));
* :func:`bayes_ratio_plot`     -- ``R_dGD(eta*) / R_Bayes`` against ``xi = d / L``: proportional
  limits (lines) and finite-size values (markers), one colour per noise level, and trained models
  in the proportional regime with their error bars (Theorem 4.2 (iii));
* :func:`linear_softmax_plot`  -- linear against softmax attention across context lengths, with
  the closed-form predictions (B.1);
* :func:`activation_circuits`  -- the trained circuits of one model per activation, stacked
  (the paper's Figure 8);
* :func:`activation_dynamics`  -- ``omega_h`` and ``mu_h / 10`` against training steps, one panel
  per activation (the paper's Figure 9).

The tables they draw come from :mod:`icl_lib.paper1.optimality`.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import pandas as pd

from ..circuits import mu_of, omega_of
from .curves import plot_against_L
from .heatmaps import circuit_heatmaps
from .style import HEAD_COLORS

__all__ = ["linearisation_plot", "bayes_ratio_plot", "linear_softmax_plot", "activation_circuits", "activation_dynamics"]


def linearisation_plot(table: pd.DataFrame, trained: pd.DataFrame | None = None, ax=None):
    """The columns of ``table`` (index ``omega``; relative RMS error of hand-set heads against
    their linearisation, :func:`~icl_lib.paper1.optimality.linearisation.linearisation_curves`) on log-log axes,
    with dotted ``omega^2`` and ``omega`` guides through their first point, and the trained models
    of ``trained`` (:func:`~icl_lib.paper1.optimality.linearisation.trained_linearisation_points`) as black
    points.  Chapter 5 (paper 1, Theorem 4.2 (i))."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.2, 3.9))
    w = table.index.to_numpy(dtype=float)
    for k, c in enumerate(table.columns):
        y = table[c].to_numpy(dtype=float)
        ax.plot(w, y, "o-", color=HEAD_COLORS[k % 10], lw=1.4, ms=4, label=f"hand-set: {c}")
        order = 2 if k == 0 else 1
        ax.plot(w, y[0] * (w / w[0]) ** order, ":", color=HEAD_COLORS[k % 10], lw=1.0,
                label=f"slope {order}")
    if trained is not None and len(trained):
        ax.plot(trained["|omega|"], trained["relative RMS (dGD)"], "k^", ms=6,
                label="trained 2-head models (own eta)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("omega")
    ax.set_ylabel("RMS(y_hat - y_hat_dGD) / RMS(y_hat_dGD)")
    ax.legend(fontsize=7)
    return ax


def bayes_ratio_plot(limits: pd.DataFrame, ratio_df: pd.DataFrame, d: int, ax=None,
                     trained: pd.DataFrame | None = None, sigma2: float | None = None):
    """``limits`` (index ``xi``, one column per ``sigma2``:
    :func:`~icl_lib.paper1.optimality.proportional.ratio_limits`) as lines and the finite-``d``
    ratios of ``ratio_df`` (:func:`~icl_lib.paper1.optimality.proportional.bayes_ratio_grid`) as
    markers of the same colour, on a log ``xi`` axis; with ``trained``
    (:func:`~icl_lib.paper1.optimality.proportional.proportional_table`, at noise ``sigma2``) the
    trained models' loss over the Bayes risk as black points with 95% error bars, and the exact
    ``R_dGD* / R_Bayes`` at their ``(d, L)`` as crosses.  Chapter 5."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.2, 3.9))
    xi = limits.index.to_numpy()
    for k, s2 in enumerate(limits.columns):
        color = HEAD_COLORS[k % 10]
        ax.plot(xi, limits[s2].to_list(), color=color, lw=1.4, label=f"sigma^2 = {s2:g}")
        sub = ratio_df[ratio_df.sigma2 == s2]
        ax.plot(sub.xi, sub.ratio, "o", color=color, ms=4)
    if trained is not None and len(trained):
        xi = trained.index.to_numpy(dtype=float)
        ax.errorbar(xi, trained["loss/R_Bayes"], yerr=1.96 * trained["se (vs R_Bayes)"], fmt="k^", ms=6,
                    capsize=3, label=f"trained, d = {int(trained['d'].iloc[0])}, sigma^2 = {sigma2:g}")
        ax.plot(xi, trained["R_dGD*/R_Bayes"], "kx", ms=6, label="exact R_dGD*/R_Bayes there")
    ax.set_xscale("log")
    ax.set_xlabel("xi = d / L")
    ax.set_ylabel("R_dGD(eta*) / R_Bayes")
    ax.set_title(f"lines: proportional limit; markers: d = {d}", fontsize=9)
    ax.legend(fontsize=8)
    return ax


def linear_softmax_plot(table: pd.DataFrame, errors: pd.DataFrame, train_L: int, ax=None):
    """Median losses of 2-head softmax and linear attention (columns ``softmax``, ``linear`` of
    ``table``, standard errors in ``errors``) against ``L``, with their closed-form predictions
    (``predicted softmax``, ``predicted linear``) as grey lines: the table of
    :func:`~icl_lib.paper1.optimality.linear_attention.linear_vs_softmax`.  Chapter 5 (paper 1, B.1)."""
    names = {"softmax": "softmax attention (2 heads)", "linear": "linear attention (2 heads, N fixed)"}
    preds = {"predicted softmax": "prediction: debiased GD, learned eta",
             "predicted linear": "prediction: vanilla GD, step x L/N"}
    return plot_against_L(
        list(table.index),
        {names[k]: table[k].to_numpy() for k in names},
        {names[k]: errors[k].to_numpy() for k in names},
        {preds[k]: table[k].to_numpy() for k in preds},
        ax=ax,
        train_L=train_L,
    )


def activation_circuits(runs: Mapping[str, object], d: int):
    """The final ``KQ_h`` / ``OV_h`` heatmaps (:func:`~icl_lib.figures.circuit_heatmaps`) of one
    run per activation ``{name of f: run}``, one sub-figure each, titled with ``f``, the run seed
    and its pattern (paper 1, Figure 8; chapter 5)."""
    heads = max(r.spec.model.heads for r in runs.values())
    fig = plt.figure(figsize=(heads * 2.3 + 1.0, 3.2 * len(runs)))
    subs = fig.subfigures(len(runs), 1, squeeze=False)[:, 0]
    for sub, (name, r) in zip(subs, runs.items()):
        title = f"f = {name}, seed {r.spec.seed}: {r.pattern().kind}"
        circuit_heatmaps(r.KQ, r.OV, d, title=title, fig=sub)
    return fig


def activation_dynamics(runs: Mapping[str, object], d: int):
    """``omega_h`` (solid) and ``mu_h / 10`` (dashed) against the training step (log axis) of one
    run per activation ``{name of f: run}``, one panel each with a shared y axis (paper 1,
    Figure 9; chapter 5)."""
    n = len(runs)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.0), sharey=True, squeeze=False)
    for ax, (name, r) in zip(axes[0], runs.items()):
        h = r.history
        st = h["step"].clamp_min(1).numpy()
        w, m = omega_of(h["KQ"], d).numpy(), mu_of(h["OV"], d).numpy()  # (T, H)
        for k in range(w.shape[1]):
            color = HEAD_COLORS[k % 10]
            ax.plot(st, w[:, k], color=color, lw=1.5, label=f"omega_{k + 1}")
            ax.plot(st, m[:, k] / 10, color=color, lw=1.2, ls="--", label=f"mu_{k + 1} / 10")
        ax.set_xscale("log")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set_title(f"f = {name}")
        ax.set_xlabel("training step")
    axes[0, 0].legend(fontsize=7)
    return fig
