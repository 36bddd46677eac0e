"""The loss landscape of paper 1, Figure 5: true loss against the approximate loss (4.1) (chapter 3)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm, SymLogNorm

__all__ = ["landscape_panels"]


def landscape_panels(w, m, true, approx, valley_w=None, valley_m=None, levels: int = 16, top: float = 1.5,
                     linthresh: float = 0.01):
    """Figure 5 of paper 1: the difference ``true - approx`` as a heatmap (symmetric-log colours,
    linear within ``linthresh``), and the two loss landscapes as filled contours on one logarithmic
    colour scale clipped at ``top``, over ``w`` (x axis) and ``m`` (y axis); ``valley_w, valley_m``
    draws the valley floor ``m*(w)`` of (4.1).  Chapter 3."""
    w, m = np.asarray(w, float), np.asarray(m, float)
    true, approx = np.asarray(true, float), np.asarray(approx, float)  # (len(m), len(w))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.0), constrained_layout=True)
    diff = true - approx
    lim = float(np.abs(diff).max())
    im = axes[0].pcolormesh(w, m, diff, cmap="RdBu_r", shading="nearest",
                            norm=SymLogNorm(linthresh=linthresh, vmin=-lim, vmax=lim, base=10))
    fig.colorbar(im, ax=axes[0], label="true - (4.1) (symmetric log scale)")
    axes[0].set_title("difference")
    lo = float(min(true.min(), approx.min()))
    lv = np.geomspace(lo, top, levels)
    for ax, z, name in ((axes[1], true, "true loss (Monte Carlo)"), (axes[2], approx, "approximate loss (4.1)")):
        cs = ax.contourf(w, m, np.clip(z, lo, top), levels=lv, cmap="viridis", norm=LogNorm(lo, top), extend="max")
        ax.set_title(name)
    cb = fig.colorbar(cs, ax=list(axes[1:]), label=f"ICL loss (log scale, clipped at {top:g})")
    cb.set_ticks([t for t in (0.25, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5) if lo <= t <= top])
    cb.set_ticklabels([f"{t:g}" for t in (0.25, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5) if lo <= t <= top])
    for ax in axes:
        ax.set_xlabel(r"$\omega$ (heads $\pm\omega$)")
        ax.set_ylabel(r"$\mu$ (heads $\pm\mu$)")
        if valley_w is not None:
            ax.plot(valley_w, valley_m, color="w" if ax is not axes[0] else "k", lw=1.5, ls="--",
                    label=r"valley floor $\mu^*(\omega)$ of (4.1)")
            ax.set_ylim(m.min(), m.max())
            ax.set_xlim(w.min(), w.max())
    axes[0].legend(fontsize=8, loc="upper right")
    return fig
