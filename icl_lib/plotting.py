"""Figures in one style: circuit heatmaps, dynamics and loss curves (all chapters).

* :func:`circuit_heatmaps` -- every head's ``KQ_h`` and ``OV_h`` (paper 1, Figures 1a, 2a, 4, 13),
  diverging colour map centred at 0, one colour scale shared by a model's KQ blocks and one by
  its OV rows;
* :func:`dynamics` -- a per-head quantity against training steps (Figures 1b, 2b-c, 12);
* :func:`loss_curves` -- losses against steps (or L) with horizontal reference risks.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

__all__ = ["set_style", "circuit_heatmaps", "dynamics", "loss_curves", "HEAD_COLORS"]

HEAD_COLORS = sns.color_palette("tab10")
CMAP = "RdBu_r"


def set_style() -> None:
    """The book's plotting style (called on import)."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.titlesize": 10, "figure.autolayout": False})


def _np(t) -> np.ndarray:
    return t.detach().double().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)


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
    KQ, OV = _np(KQ), _np(OV)
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
    steps, values = _np(steps), _np(values)
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
    x = _np(x)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for k, (label, y) in enumerate(curves.items()):
        y = _np(y)
        ax.plot(x, y, label=label, color=HEAD_COLORS[k % 10], lw=1.5)
        if errors and label in errors:
            e = _np(errors[label])
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


set_style()
