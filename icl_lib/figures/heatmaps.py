"""Heatmaps: attention circuits, matrices and pre-conditioners, centred at 0 (chapters 1-7).

* :func:`circuit_heatmaps`  -- every head's ``KQ_h`` and ``OV_h`` (paper 1, Figures 1a, 2a, 4, 13),
  one colour scale shared by a model's KQ blocks and one by its OV rows;
* :func:`snapshot_heatmaps` -- the circuits of several runs at several training steps (chapter 3);
* :func:`matrix_heatmaps`   -- a row of annotated ``d x d`` matrices (chapter 6: Figures 11 and 14);
* :func:`gamma_heatmaps`    -- per-task effective pre-conditioners with the supports outlined (chapter 7).
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.patches import Rectangle

from ..config import DataConfig
from ..paper1.anisotropic.learned import scaled_inverse_blocks
from ..paper1.anisotropic.preconditioner import rel_dist, trace_normalise
from .style import CMAP, as_array

__all__ = [
    "circuit_heatmaps",
    "snapshot_heatmaps",
    "matrix_heatmaps",
    "gamma_heatmaps",
    "pattern_with_matrices",
    "inverse_heatmaps",
    "stacked_circuit_heatmaps",
]


def circuit_heatmaps(
    KQ,
    OV,
    d: int,
    title: str | None = None,
    head_labels: Sequence[str] | None = None,
    annotate: bool = False,
    fig=None,
):
    """Heatmaps of ``KQ (H, D, D)`` (top row) and ``OV (H, N, D)`` (bottom row), one column per head.

    Colour scales are centred at 0 and shared across the model's heads (one for KQ, one for OV).
    Axis ticks name the coordinates: ``x1..xd`` then ``y`` (or ``y1..yN``).  ``fig`` may be a
    figure or a sub-figure (several models in one figure).  Drawn with ``imshow``: seaborn's
    heatmap redraws the whole figure for every panel, which made many-panel figures slow.
    """
    KQ, OV = as_array(KQ), as_array(OV)
    H, D, _ = KQ.shape
    N = OV.shape[1]
    names = [f"x{i + 1}" for i in range(d)] + (["y"] if N == 1 else [f"y{n + 1}" for n in range(N)])
    kq_max = float(np.abs(KQ).max()) or 1.0
    ov_max = float(np.abs(OV).max()) or 1.0
    if fig is None:
        fig = plt.figure(figsize=(2.2 * H + 1.0, 2.4 + 0.3 * N + 0.6), layout="constrained")
    axes = fig.subplots(2, H, squeeze=False, gridspec_kw={"height_ratios": [D, max(1.6, 0.9 * N)]})
    for h in range(H):
        im_kq = axes[0, h].imshow(KQ[h], cmap=CMAP, vmin=-kq_max, vmax=kq_max)
        im_ov = axes[1, h].imshow(OV[h], cmap=CMAP, vmin=-ov_max, vmax=ov_max, aspect="auto")
        label = head_labels[h] if head_labels is not None else f"head {h + 1}"
        axes[0, h].set_title(f"KQ, {label}", fontsize=8)
        for ax in axes[:, h]:
            ax.set_xticks(range(D), names, fontsize=6)
            ax.grid(False)
        axes[0, h].set_yticks(range(D), names if h == 0 else [""] * D, fontsize=6)
        ov_names = ["OV"] if N == 1 else [f"OV{n + 1}" for n in range(N)]
        axes[1, h].set_yticks(range(N), ov_names if h == 0 else [""] * N, fontsize=6)
        if annotate:
            for ax, M in ((axes[0, h], KQ[h]), (axes[1, h], OV[h])):
                for (i, j), v in np.ndenumerate(M):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=5)
    cb = fig.colorbar(im_kq, ax=list(axes[0]), shrink=0.8, pad=0.02)
    cb.ax.tick_params(labelsize=6)
    cb = fig.colorbar(im_ov, ax=list(axes[1]), shrink=0.9, pad=0.02, ticks=[-ov_max, 0.0, ov_max], format="%.2g")
    cb.ax.tick_params(labelsize=6)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def snapshot_heatmaps(items: Sequence[tuple[str, object, Sequence[str] | None]], at_steps: Sequence[int]):
    """Heatmaps of ``KQ_h`` and ``OV_h`` at the logged steps nearest ``at_steps`` (paper 1, Figures 4
    and 13): one row per snapshot, one column per ``(title, run, head labels)``.  Each panel has
    its own colour scale (the circuits grow along training).  Chapter 3."""
    widths = [2.0 * run.spec.model.heads + 0.8 for _, run, _ in items]
    fig = plt.figure(figsize=(sum(widths), 3.0 * len(at_steps)), layout="constrained")
    grid = fig.subfigures(len(at_steps), len(items), width_ratios=widths, squeeze=False)
    for c, (title, run, labels) in enumerate(items):
        steps = run.history["step"].numpy()
        for r, s in enumerate(at_steps):
            k = int(np.argmin(np.abs(steps - s)))
            circuit_heatmaps(run.history["KQ"][k], run.history["OV"][k], run.d,
                             title=f"{title}, step {int(steps[k])}", head_labels=labels, fig=grid[r, c])
    return fig


def matrix_heatmaps(mats: dict, fig=None, annotate: bool = True, share_scale: bool = False, cmap: str = "RdBu_r"):
    """One row of ``d x d`` heatmaps ``{title: matrix}``, each centred at 0 (one colour scale per
    panel unless ``share_scale``), entries annotated (chapter 6: Figures 11 and 14)."""
    mats = {k: torch.as_tensor(v).detach().double().cpu().numpy() for k, v in mats.items()}
    n = len(mats)
    if fig is None:
        fig = plt.figure(figsize=(2.6 * n, 2.7))
    axes = fig.subplots(1, n, squeeze=False)[0]
    vmax_all = max(float(np.abs(m).max()) for m in mats.values()) or 1.0
    for ax, (title, m) in zip(axes, mats.items()):
        vmax = vmax_all if share_scale else (float(np.abs(m).max()) or 1.0)
        names = [f"x{i + 1}" for i in range(m.shape[0])]
        sns.heatmap(m, ax=ax, cmap=cmap, vmin=-vmax, vmax=vmax, center=0, square=True, cbar=False,
                    annot=annotate, fmt=".2f", annot_kws={"size": 6}, xticklabels=names, yticklabels=names)
        ax.set_title(title)
        ax.tick_params(labelsize=7)
    return fig


def gamma_heatmaps(gammas: Sequence[torch.Tensor], titles: Sequence[str], data: DataConfig, fig=None):
    """Heatmaps of effective pre-conditioners ``Gamma (N, d)`` (:func:`effective_gamma`), one panel
    per model, each scaled by its largest entry; the tasks' supports are outlined (chapter 7)."""
    k = len(gammas)
    if fig is None:
        fig = plt.figure(figsize=(3.0 * k + 0.6, 1.0 + 0.45 * data.n_tasks))
    axes = fig.subplots(1, k, squeeze=False)[0]
    masks = data.support_mask()
    for ax, g, title in zip(axes, gammas, titles):
        g = g.detach().double().cpu()
        g = (g / (float(g.abs().max()) or 1.0)).numpy()
        sns.heatmap(g, ax=ax, cmap=CMAP, vmin=-1, vmax=1, center=0, cbar=False, annot=True, fmt=".2f",
                    annot_kws={"size": 7}, xticklabels=[f"x{j + 1}" for j in range(data.d)],
                    yticklabels=[f"task {n + 1}" for n in range(data.n_tasks)])
        for n in range(data.n_tasks):
            for j in range(data.d):
                if masks[n, j]:
                    ax.add_patch(Rectangle((j, n), 1, 1, fill=False, lw=1.2, ec="0.2"))
        ax.set_title(title)
        ax.tick_params(labelsize=7)
    return fig


# ------------------------------------------------------------------------------- chapter 6
def pattern_with_matrices(run, mats: dict, title: str | None = None):
    """Paper 1, Figure 11's layout (chapter 6): the circuits of ``run`` (:func:`circuit_heatmaps`,
    heads labelled with their group) on the left, a row of reference matrices ``{title: (d, d)}``
    (:func:`matrix_heatmaps`) on the right.  ``title`` (default: the run's ``rho`` and seed) gets
    the run's pattern appended."""
    p = run.pattern()
    title = title or f"rho = {run.spec.data.rho}, seed {run.spec.seed}"
    fig = plt.figure(figsize=(12.5, 4.2))
    left, right = fig.subfigures(1, 2, width_ratios=[1.15, 1])
    circuit_heatmaps(run.KQ, run.OV, run.d, head_labels=[f"head {h + 1} ({g})" for h, g in enumerate(p.groups)],
                     title=f"{title}: {p.kind}", fig=left)
    matrix_heatmaps(mats, fig=right)
    return fig


def inverse_heatmaps(KQ, d: int, Sigma, Gamma_star):
    """Paper 1, Figure 14 (chapter 6): every head's inverse covariate block ``KQ_h[:d, :d]^{-1}``
    divided by its mean diagonal, beside ``Sigma`` and ``Gamma*^{-1}`` (divided the same way), one
    colour scale; titles give the relative Frobenius distances to ``Sigma`` and ``Gamma*^{-1}``."""
    inv = scaled_inverse_blocks(torch.as_tensor(KQ), d)  # (H, d, d)
    inv_star = trace_normalise(torch.linalg.inv(torch.as_tensor(Gamma_star, dtype=torch.float64)))  # (d, d)
    panels = {f"head {h + 1}: $KQ^{{-1}}$ / tr\nd to $\\Sigma$ {float(rel_dist(inv[h], Sigma)):.3f}, "
              f"to $\\Gamma^{{\\star-1}}$ {float(rel_dist(inv[h], inv_star)):.3f}": inv[h] for h in range(inv.shape[0])}
    panels[r"$\Sigma$"] = Sigma
    panels[r"$\Gamma^{\star-1}$ / tr" + f"\nd to $\\Sigma$ {float(rel_dist(inv_star, Sigma)):.3f}"] = inv_star
    return matrix_heatmaps(panels, fig=plt.figure(figsize=(12, 3.4)), share_scale=True)


def stacked_circuit_heatmaps(models: Sequence[tuple], d: int, fig=None, row_height: float = 3.9):
    """:func:`circuit_heatmaps` of several models, one sub-figure per model, stacked vertically.

    ``models``: ``(KQ (H, D, D), OV (H, N, D), title, head_labels)`` per model (``head_labels``
    may be ``None``); the models may have different head counts and the figure is as wide as the
    one with the most.  One model gives one row (the sub-figures are always a column, so a single
    head count works).  Chapters 2 and 7 (paper 1, Figures 1a, 2a, 15-18).
    """
    models = list(models)
    if not models:
        raise ValueError("models=[] is invalid: accepted at least one (KQ, OV, title, head_labels)")
    H_max = max(int(as_array(KQ).shape[0]) for KQ, _, _, _ in models)
    if fig is None:
        fig = plt.figure(figsize=(2.2 * H_max + 1.2, row_height * len(models)))
    subs = fig.subfigures(len(models), 1, squeeze=False)[:, 0]
    for sub, (KQ, OV, title, labels) in zip(subs, models):
        circuit_heatmaps(KQ, OV, d, title=title, head_labels=labels, fig=sub)
    return fig
