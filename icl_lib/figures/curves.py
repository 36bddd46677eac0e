"""Curves: quantities against training steps, context length or iterations (all chapters).

* :func:`dynamics`       -- a per-head quantity against training steps (paper 1, Figures 1b, 2b-c, 12);
* :func:`loss_curves`    -- losses against steps (or L) with horizontal reference risks;
* :func:`plot_against_L` -- losses against the context length with error bars (chapter 5, Figure 3);
* :func:`excess_curves`  -- ``L(theta_t) - L*`` against ``t`` on a log scale, one line per method
  (median over repetitions, band from the smallest to the largest; chapter 8);
* :func:`loglog_points`  -- measured points with error bars, a fitted power law and reference
  curves on log-log axes (chapter 8).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from .style import HEAD_COLORS, as_array

__all__ = [
    "dynamics",
    "loss_curves",
    "plot_against_L",
    "excess_curves",
    "loglog_points",
    "head_split_curves",
    "length_loss_curves",
    "rho_distances",
    "population_gap_figure",
    "method_comparison_figure",
    "kappa_rate_figure",
    "saddle_figure",
    "loglog_positive_points",
]

_TINY = 1e-32  # below float64 round-off of the excess loss


def dynamics(
    steps,
    values,
    ylabel: str,
    ax=None,
    labels: Sequence[str] | None = None,
    marks: Mapping[str, float] | None = None,
    logx: bool = False,
):
    """Plot ``values (T, H)`` against ``steps (T,)``, one line per head; ``marks`` adds labelled
    vertical lines (stage boundaries, for instance)."""
    steps, values = as_array(steps), as_array(values)
    if values.ndim == 1:
        values = values[:, None]
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3))
    for h in range(values.shape[1]):
        lab = labels[h] if labels is not None else f"head {h + 1}"
        ax.plot(steps, values[:, h], color=HEAD_COLORS[h % 10], label=lab, lw=1.5)
    for k, (name, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color="0.3", ls=("--", ":", "-.")[k % 3], lw=1)
        ax.text(x, ax.get_ylim()[1], f" {name}", va="top", ha="left", fontsize=8, color="0.3")
    if logx:
        ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.axhline(0, color="0.6", lw=0.6)
    ax.legend(fontsize=8)
    return ax


def loss_curves(
    x,
    curves: Mapping[str, object],
    references: Mapping[str, float] | None = None,
    ax=None,
    xlabel: str = "training step",
    ylabel: str = "ICL loss",
    logx: bool = False,
    logy: bool = False,
    errors: Mapping[str, object] | None = None,
):
    """Loss curves ``{label: values}`` against ``x`` with horizontal lines for reference risks."""
    x = as_array(x)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for k, (label, y) in enumerate(curves.items()):
        y = as_array(y)
        ax.plot(x, y, label=label, color=HEAD_COLORS[k % 10], lw=1.5)
        if errors and label in errors:
            e = as_array(errors[label])
            ax.fill_between(x, y - e, y + e, color=HEAD_COLORS[k % 10], alpha=0.25, lw=0)
    styles = ["--", ":", "-.", (0, (5, 1))]
    for k, (label, value) in enumerate((references or {}).items()):
        ax.axhline(value, color="0.25", ls=styles[k % 4], lw=1.1, label=f"{label} ({value:.4f})")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def plot_against_L(
    Ls: Sequence[int],
    curves: Mapping[str, object],
    errors: Mapping[str, object] | None = None,
    references: Mapping[str, object] | None = None,
    ax=None,
    train_L: int | None = None,
    ylabel: str = "ICL test loss",
    logy: bool = True,
):
    """Losses against the context length: ``curves`` with error bars (models), ``references`` as
    grey dashed or dotted lines (estimators), a vertical line at the training length.  Chapter 5."""
    x = np.asarray(list(Ls), dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.2, 4.0))
    for k, (label, y) in enumerate(curves.items()):
        y = np.asarray(y, dtype=float)
        e = None if not errors or label not in errors else np.asarray(errors[label], dtype=float)
        ax.errorbar(x, y, yerr=e, label=label, color=HEAD_COLORS[k % 10], marker="o", ms=3.5, lw=1.5, capsize=2)
    styles = ["--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1))]
    greys = ["0.15", "0.35", "0.5", "0.25", "0.6"]
    for k, (label, y) in enumerate((references or {}).items()):
        ax.plot(x, np.asarray(y, dtype=float), color=greys[k % 5], ls=styles[k % 5], lw=1.3, label=label)
    if train_L is not None:
        ax.axvline(train_L, color="0.6", lw=0.8)
        ax.text(train_L, 0.02, f" training L = {train_L}", transform=ax.get_xaxis_transform(), va="bottom",
                fontsize=8, color="0.4")
    ax.set_xscale("log")
    ax.set_xticks(x)
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel("context length L")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def excess_curves(curves: Mapping[str, object], ax=None, floor: float | None = None, floor_label: str = "floor",
                  styles: Mapping[str, str] | None = None, ylabel: str = r"$L(\theta_t) - L^\star$"):
    """Plot ``{label: excess (T+1,) or (T+1, R)}`` on a log scale against the iteration ``t``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    for k, (label, e) in enumerate(curves.items()):
        e = np.clip(as_array(e), _TINY, None)
        if e.ndim == 1:
            e = e[:, None]
        t = np.arange(e.shape[0])
        color = HEAD_COLORS[k % 10]
        ls = (styles or {}).get(label, "-")
        ax.plot(t, np.median(e, 1), color=color, ls=ls, lw=1.5, label=label)
        if e.shape[1] > 1:
            ax.fill_between(t, e.min(1), e.max(1), color=color, alpha=0.15, lw=0)
    if floor is not None:
        ax.axhline(floor, color="0.3", ls=":", lw=1.1, label=f"{floor_label} ({floor:.2g})")
    ax.set_yscale("log")
    ax.set_xlabel("iteration $t$")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return ax


def loglog_points(x, y, yerr=None, ax=None, label: str = "measured", fit=None, fit_label: str | None = None,
                  references: Mapping[str, object] | None = None, color_index: int = 0,
                  xlabel: str = "$n$", ylabel: str = ""):
    """Points ``y(x)`` with error bars on log-log axes, the fitted power law ``fit`` (a
    :class:`icl_lib.paper2.fits.Fit` on natural logs) and reference curves ``{label: y_ref(x)}``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.6))
    x, y = as_array(x), as_array(y)
    color = HEAD_COLORS[color_index % 10]
    ax.errorbar(x, y, yerr=None if yerr is None else as_array(yerr), fmt="o", color=color, ms=4, capsize=2, label=label)
    if fit is not None:
        xs = np.geomspace(x.min(), x.max(), 50)
        text = fit_label or f"fit: slope {fit.slope:.2f} ± {fit.slope_se:.2f}"
        ax.plot(xs, np.exp(fit.intercept) * xs**fit.slope, color=color, lw=1.2, label=text)
    styles = ["--", ":", "-.", (0, (5, 1))]
    for k, (lab, yr) in enumerate((references or {}).items()):
        ax.plot(x, as_array(yr), color="0.3", ls=styles[k % 4], lw=1.1, label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return ax


# ------------------------------------------------------------------------------- chapter 6
def head_split_curves(histories: Mapping[float, dict | None], shape_threshold: float | None = None,
                      scale_threshold: float = 0.25):
    """The two heads against the mirror pair ``+-omega Gamma`` along training (chapter 6), from
    :func:`icl_lib.paper1.anisotropic.learned.head_split_histories`: spread of ``|omega_h|`` (left) and
    distance between the heads' normalised blocks (right), thin lines per seed, thick medians, one
    colour per ``rho`` (``None`` entries keep their colour unused); dashed: the thresholds."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for k, (r, h) in enumerate(histories.items()):
        if h is None:
            continue
        for ax, key in zip(axes, ("spread", "shape")):
            ax.plot(h["step"], h[key].T, color=HEAD_COLORS[k], lw=0.6, alpha=0.5)
            ax.plot(h["step"], np.median(h[key], 0), color=HEAD_COLORS[k], lw=2, label=rf"$\rho$ = {r}")
    axes[0].axhline(scale_threshold, color="0.3", ls="--", lw=1)
    if shape_threshold is not None:
        axes[1].axhline(shape_threshold, color="0.3", ls="--", lw=1)
    for ax, label in zip(axes, [r"spread of $|\omega_h|$", "distance between the heads' shapes"]):
        ax.set_ylim(0, 1)
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        if ax.get_legend_handles_labels()[0]:  # no positive/negative seed: no legend
            ax.legend(fontsize=8)
    return fig


def length_loss_curves(table, train_L: int):
    """Chapter 6's losses against the context length, from
    :func:`icl_lib.paper1.anisotropic.model_losses.length_losses` (rows ``L``): every column but ``model lo`` /
    ``model hi`` as a curve on log-log axes, the models' band from their smallest to their largest
    loss, a dotted line at the training length."""
    x = table.index.to_list()
    shown = {c: table[c].to_list() for c in table.columns if c not in ("model lo", "model hi")}
    ax = loss_curves(x, shown, xlabel="context length L", logx=True, logy=True)
    ax.fill_between(x, table["model lo"].to_list(), table["model hi"].to_list(), color=HEAD_COLORS[0], alpha=0.25,
                    lw=0)
    ax.axvline(train_L, color="0.6", lw=0.8, ls=":")
    return ax


def rho_distances(points):
    """Distances of the normalised learned pre-conditioner to ``Gamma*``, ``Sigma^{-1}`` and ``I_d``
    against ``rho`` (chapter 6): one dot per row of ``points`` (the positive/negative rows of
    :func:`icl_lib.paper1.anisotropic.learned.circuit_table`), lines through the medians per ``rho``."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    cols = [("d(Gamma, Gamma*)", r"to $\Gamma^\star$"), ("d(Gamma, Sigma^-1)", r"to $\Sigma^{-1}$"),
            ("d(Gamma, I)", r"to $I_d$")]
    for k, (col, label) in enumerate(cols):
        c = HEAD_COLORS[k]
        ax.scatter(points.rho + (k - 1) * 0.012, points[col], color=c, s=18, alpha=0.7)
        medians = points.groupby("rho")[col].median()
        ax.plot(medians.index, medians.values, color=c, lw=1.5, marker="o", label=label)
    ax.set_xlabel(r"$\rho$")
    ax.set_ylabel("relative Frobenius distance")
    ax.legend(fontsize=8)
    return ax


def population_gap_figure(gap: Mapping[str, dict], fits: Mapping[str, object], n_min: int = 32):
    """Chapter 8's population-loss figure (paper 2, Section 4), one colour per point.

    Left: the Monte Carlo ``E[L_hat]`` against ``n`` (+-2 standard errors) and the closed form
    ``L`` (dashed); right: the gap ``E[L_hat] - L`` on log-log axes with its fitted power law
    (``fits``: :func:`icl_lib.paper2.experiment_fits.gap_fits` over ``n >= n_min``).  ``gap`` is
    :func:`icl_lib.paper2.experiments.loss_gap_vs_n`'s result (first repetition shown).
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for k, (label, res) in enumerate(gap.items()):
        ns, lh, se = res["n"].numpy(), res["L_hat"][:, 0].numpy(), res["se"][:, 0].numpy()
        color = HEAD_COLORS[k]
        ax1.errorbar(ns, lh, yerr=2 * se, fmt="o", ms=4, capsize=2, color=color, label=f"E L_hat, {label}")
        ax1.axhline(res["L"].item(), color=color, ls="--", lw=1, label=f"L, {label}")
        fit = fits[label]
        loglog_positive_points(ns, res["gap"][:, 0], 2 * se, ax=ax2, label=label, fit=fit, color_index=k,
                      fit_label=f"fit n >= {n_min}: slope {fit.slope:.3f} ± {fit.slope_se:.3f}",
                      ylabel=r"$\mathbb{E}\hat L - L$")
    ax1.set_xscale("log")
    ax1.set_xlabel("$n$")
    ax1.set_ylabel("loss")
    ax1.legend(fontsize=7)
    plt.tight_layout()
    return fig


def method_comparison_figure(population: Mapping[str, object], finite: Mapping[str, object], floor: float,
                             finite_title: str, floor_label: str = "Algorithm 1 floor"):
    """Chapter 8's comparison of Algorithm 1 with its baselines (paper 2, Theorem 2): excess loss
    against the iteration, ``{label: excess (T+1, R)}`` with the population oracle (left) and the
    finite-n oracle (right, titled ``finite_title``, with the dotted ``floor``)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    excess_curves(population, ax=ax1)
    ax1.set_title("population oracle ($n = \\infty$)")
    excess_curves(finite, ax=ax2, floor=floor, floor_label=floor_label)
    ax2.set_title(finite_title)
    plt.tight_layout()
    return fig


def kappa_rate_figure(kappas, one_minus_mu: Mapping[str, object], fits: Mapping[str, object]):
    """Chapter 8's rate against the condition number: ``1 - mu`` ``{label: (len(kappas), R)}``
    (mean +- standard error over the ``R`` problems) on log-log axes with the fitted power laws
    ``fits`` (:func:`icl_lib.paper2.fits.slope_over_repetitions`), one colour per method."""
    import math

    import torch

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, (label, om) in enumerate(one_minus_mu.items()):
        om = torch.as_tensor(om)
        fit = fits[label]
        loglog_positive_points(kappas, om.mean(1), om.std(1) / math.sqrt(om.shape[1]), ax=ax, label=label, fit=fit,
                      color_index=k, fit_label=f"slope {fit.slope:+.2f} ± {fit.slope_se:.2f}",
                      xlabel=r"condition number $\kappa$ of $\Sigma$", ylabel=r"$1 - \mu$")
    return fig


def saddle_figure(curves: Mapping[str, object], L0: float, x_log, t_escape, slope_pred: float,
                  styles: Mapping[str, str] | None = None):
    """Chapter 8's saddle figure (paper 2, Section 1.1).  Left: excess loss curves ``{label: (T+1, R)}``
    with the plateau ``L(0) - L*`` dashed; right: escape times against ``ln(1/eps)`` with the
    predicted slope drawn through the mean of all points but the first (the largest start)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    excess_curves(curves, ax=ax1, styles=styles)
    ax1.axhline(L0, color="0.3", ls="--", lw=1, label=r"$L(0) - L^\star$ (saddle)")
    ax1.set_ylim(1e-12, 3 * L0)
    ax1.legend(fontsize=7)
    x_log, t_escape = as_array(x_log), as_array(t_escape)
    ax2.plot(x_log, t_escape, "o", label="measured")
    ax2.plot(x_log, t_escape[1:].mean() + slope_pred * (x_log - x_log[1:].mean()), "--", color="0.3",
             label=f"predicted slope {slope_pred:.2f}")
    ax2.set_xlabel(r"$\ln(1/\varepsilon)$")
    ax2.set_ylabel("escape time (steps)")
    ax2.legend(fontsize=8)
    plt.tight_layout()
    return fig


def loglog_positive_points(x, y, yerr=None, ax=None, references: Mapping[str, object] | None = None, **kw):
    """:func:`loglog_points` of the points whose ``x`` and ``y`` are positive and finite (a
    diverged run or a Monte Carlo value below its noise cannot be shown on log axes); the
    ``references`` curves are restricted to the same points.  With no such point the axes say so
    and stay linear.  Chapter 8."""
    x, y = as_array(x), as_array(y)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if not keep.any():
        if ax is None:
            _, ax = plt.subplots(figsize=(5, 3.6))
        ax.text(0.5, 0.5, f"{kw.get('label', 'measured')}: no positive finite value to show",
                transform=ax.transAxes, ha="center", va="center", fontsize=8)
        ax.set_xlabel(kw.get("xlabel", "$n$"))
        ax.set_ylabel(kw.get("ylabel", ""))
        return ax
    if not keep.all():
        x, y = x[keep], y[keep]
        yerr = None if yerr is None else as_array(yerr)[keep]
        references = {k: as_array(v)[keep] for k, v in (references or {}).items()}
    return loglog_points(x, y, yerr, ax=ax, references=references, **kw)
