"""The approximate loss (4.1) of paper 1 against the true loss (chapter 3).

* :func:`landscape_panels` -- Figure 5: the true and approximate landscapes and their difference;
* :func:`valley_figure`    -- both losses along the valley floor of (4.1) and their limits;
* :func:`norm_violins`     -- Figure 19: the attention-probability norms that (4.1) relies on.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.colors import LogNorm, SymLogNorm

__all__ = ["landscape_panels", "valley_figure", "norm_violins"]


def landscape_panels(w, m, true, approx, valley_w=None, valley_m=None, levels: int = 16, top: float = 1.5,
                     linthresh: float = 0.01):
    """Figure 5 of paper 1: the difference ``true - approx`` as a heatmap (symmetric-log colours,
    linear within ``linthresh``), and the two loss landscapes as filled contours on one logarithmic
    colour scale clipped at ``top`` (at least twice the lowest loss), over ``w`` (x axis) and ``m``
    (y axis); ``valley_w, valley_m`` draws the valley floor ``m*(w)`` of (4.1).  Chapter 3."""
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
    top = max(top, 2 * lo)  # a large noise level puts the whole landscape above the default top
    lv = np.geomspace(lo, top, levels)
    for ax, z, name in ((axes[1], true, "true loss (Monte Carlo)"), (axes[2], approx, "approximate loss (4.1)")):
        cs = ax.contourf(w, m, np.clip(z, lo, top), levels=lv, cmap="viridis", norm=LogNorm(lo, top), extend="max")
        ax.set_title(name)
    cb = fig.colorbar(cs, ax=list(axes[1:]), label=f"ICL loss (log scale, clipped at {top:g})")
    ticks = [t for t in (0.25, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5) if lo <= t <= top]
    if len(ticks) >= 2:  # else the log scale's own ticks
        cb.set_ticks(ticks)
        cb.set_ticklabels([f"{t:g}" for t in ticks])
    for ax in axes:
        ax.set_xlabel(r"$\omega$ (heads $\pm\omega$)")
        ax.set_ylabel(r"$\mu$ (heads $\pm\mu$)")
        if valley_w is not None:
            ax.plot(valley_w, valley_m, color="w" if ax is not axes[0] else "k", lw=1.5, ls="--",
                    label=r"valley floor $\mu^*(\omega)$ of (4.1)")
            ax.set_ylim(m.min(), m.max())
            ax.set_xlim(w.min(), w.max())
    if valley_w is not None:
        axes[0].legend(fontsize=8, loc="upper right")
    return fig


def valley_figure(w, true, se, curve_w, curve, l_star: float, r_dgd: float):
    """The true loss (Monte Carlo, ``true`` with error bars of two standard errors ``se``) at the
    valley points ``w`` and the approximate loss (4.1) ``curve`` at ``curve_w`` along the valley
    floor ``mu = mu*(omega)`` of two symmetric heads, with (4.1)'s infimum ``l_star = 1 + sigma2 -
    s*`` and the optimal debiased GD risk ``r_dgd`` (paper 1, Figure 5's river valley).  Chapter 3."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.errorbar(w, true, yerr=2 * np.asarray(se), fmt="o", color="C0", capsize=3, label="true loss (Monte Carlo)")
    ax.plot(curve_w, curve, color="C1", label="(4.1)")
    ax.axhline(l_star, color="0.3", ls="--", lw=1, label=rf"$1+\sigma^2-s^*$ = {l_star:.4f}")
    ax.axhline(r_dgd, color="0.3", ls=":", lw=1, label=f"optimal debiased GD = {r_dgd:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel(r"$\omega$ on the valley floor (heads $\pm\omega$, $\mu = \mu^*(\omega)$)")
    ax.set_ylabel("ICL loss")
    ax.legend(fontsize=8)
    return fig


def norm_violins(draws, stats, d: int, L: int, omega: float):
    """Paper 1, Figure 19: violins of the attention-probability norms ``draws`` (a table with
    columns ``panel``, ``setting``, ``norm``) in three panels, (a) at ``d`` for growing ``L``, (b)
    at ``d/L`` with ``omega``, (c) at ``d/L`` with ``omega/sqrt(d)``; black ticks in (c): the
    large-L law of the median (``stats``' column ``law median``).  Chapter 3."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), sharey=True, constrained_layout=True)
    titles = {"a": f"(a) d = {d}, omega = {omega:g}", "b": f"(b) d/L = {d}/{L}, omega = {omega:g}",
              "c": f"(c) d/L = {d}/{L}, omega = {omega:g}/sqrt(d)"}
    for ax, panel in zip(axes, "abc"):
        sub = draws[draws.panel == panel]
        sns.violinplot(data=sub, x="setting", y="norm", ax=ax, cut=0, density_norm="width", inner="quartile",
                       color="C0")
        if panel == "c":
            law = stats.loc[panel, "law median"].to_numpy()
            ax.scatter(range(len(law)), law, marker="_", s=400, color="k", zorder=3, label="large-L law (median)")
            ax.legend(fontsize=8)
        ax.set_title(titles[panel])
        ax.set_xlabel("")
        ax.tick_params(axis="x", labelsize=7, rotation=20)
    axes[0].set_ylabel(r"$\|p\|_2$")
    return fig
