"""Figures of the two-head gradient flow and its three phases (paper 1, Appendix D; chapter 4).

* :func:`phase_figure`   -- the four panels of Figures 21/22 for one solved flow;
* :func:`compare_figure` -- flows for several settings side by side.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..paper1.ode import FlowResult, valley_omega, valley_residuals
from .style import HEAD_COLORS

__all__ = ["phase_figure", "compare_figure"]


_PHASE_COLORS = {"I": "#cfe2f3", "II": "#fde9c9", "III": "#d9ead3"}


def _shade(ax, res: FlowResult, t_hi: float, labels: bool = True):
    for name, (a, b) in res.phases().items():
        b = min(b, t_hi)
        if np.isfinite(a) and np.isfinite(b) and b > a:
            ax.axvspan(a, b, color=_PHASE_COLORS[name], alpha=0.7, lw=0, zorder=0)
            if labels:
                ax.text((a + b) / 2, 1.0, f"Phase {name}", transform=ax.get_xaxis_transform(), ha="center",
                        va="bottom", fontsize=7, color="0.3")


def phase_figure(res: FlowResult, early_factor: float = 2.5, n: int = 600, title: str | None = None):
    """The four panels of paper 1, Figures 21/22, for one solved flow (chapter 4).

    (a) the four coordinates over the whole horizon (log time); (b) early-stage zoom on
    ``[0, early_factor * t_II]`` with the three phases shaded; (c) the loss (4.1) and the ratio
    ``mu_1 / omega_1``; (d) ``mu_1`` against ``mu*_1(omega)`` (eq. D.17) and ``2 mu_1 omega_1``
    against ``s*``.  Returns the figure.
    """
    t_hi = early_factor * res.t_peak if np.isfinite(res.t_peak) else res.config.t_max
    t_full = np.concatenate([[0.0], np.geomspace(1e-3, res.config.t_max, n)])
    t_early = np.linspace(0.0, t_hi, n)
    th_full, th_early = res.sample(t_full), res.sample(t_early)
    names = [r"$\mu_1$", r"$\mu_2$", r"$\omega_1$", r"$\omega_2$"]
    styles = ["-", "--", "-", "--"]
    colors = [HEAD_COLORS[0], HEAD_COLORS[0], HEAD_COLORS[1], HEAD_COLORS[1]]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.6))
    (a, b), (c, e) = axes
    for k in range(4):
        a.plot(t_full, th_full[:, k], ls=styles[k], color=colors[k], label=names[k], lw=1.5)
        b.plot(t_early, th_early[:, k], ls=styles[k], color=colors[k], label=names[k], lw=1.5)
    a.set_xscale("symlog", linthresh=1e-1)
    a.set_title("(a) full trajectory")
    b.set_title("(b) early stage, phases shaded", pad=14)
    _shade(b, res, t_hi)
    for ax in (a, b):
        ax.set_xlabel("t")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.legend(fontsize=8, ncol=2)
    loss = res.loss(th_full)
    c.plot(t_full, loss, color=HEAD_COLORS[2], lw=1.5, label=r"loss $\tilde L$")
    c.axhline(res.config.loss.loss_star, color=HEAD_COLORS[2], ls=":", lw=1, label=r"$1+\sigma^2-s^*$")
    c.set_xscale("symlog", linthresh=1e-1)
    c.set_xlabel("t")
    c.set_ylabel("loss")
    c2 = c.twinx()
    c2.plot(t_full, th_full[:, 0] / th_full[:, 2], color=HEAD_COLORS[3], lw=1.5, label=r"$\mu_1/\omega_1$")
    c2.set_yscale("log")
    c2.set_ylabel(r"$\mu_1/\omega_1$")
    c2.grid(False)
    lines = c.get_lines()[:2] + c2.get_lines()[:1]
    c.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="center left")
    c.set_title("(c) loss and ratio (phases shaded)")
    _shade(c, res, res.config.t_max, labels=False)
    ms = res.mu_star(th_full)
    e.plot(t_full, th_full[:, 0], color=HEAD_COLORS[0], lw=1.5, label=r"$\mu_1$")
    e.plot(t_full, ms[:, 0], color="0.2", ls=":", lw=1.5, label=r"$\mu_1^*(\omega)$ (D.17)")
    e.plot(t_full, res.product(th_full), color=HEAD_COLORS[4], lw=1.5, label=r"$2\mu_1\omega_1$")
    e.axhline(res.s_star, color=HEAD_COLORS[4], ls="--", lw=1, label=r"$s^*$")
    e.set_xscale("symlog", linthresh=1e-1)
    e.set_yscale("log")
    lo = max(min(th_full[:, 0].min(), 1e-3), 1e-6)
    e.set_ylim(lo, max(th_full[:, 0].max(), 1.0) * 1.5)
    e.set_xlabel("t")
    e.legend(fontsize=8)
    e.set_title(r"(d) $\mu$ against $\mu^*(\omega)$")
    for ax in (a, c, e):
        ax.set_xlim(0, res.config.t_max)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def compare_figure(results: dict, t_zoom: float | None = None, n: int = 600):
    """Flows for several settings side by side (chapter 4): (a) ``omega_1`` and ``mu_1`` in the early
    stage with each flow's phase boundaries marked; (b) the gap ``s* - 2 mu_1 omega_1`` on log-log
    axes with the late-time law ``s*^2 c d^3 w(t)^4 / 2`` of :func:`valley_residuals` dashed.

    ``results`` maps a label to a :class:`FlowResult`.  Returns the figure.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    if t_zoom is None:
        peaks = [r.t_peak for r in results.values() if np.isfinite(r.t_peak)]
        t_zoom = 2.5 * max(peaks) if peaks else max(r.config.t_max for r in results.values())
    tz = np.linspace(0, t_zoom, n)
    for k, (label, r) in enumerate(results.items()):
        col = HEAD_COLORS[k % 10]
        th = r.sample(tz)
        a.plot(tz, th[:, 2], color=col, lw=1.5, label=rf"$\omega_1$, {label}")
        a.plot(tz, th[:, 0], color=col, lw=1.5, ls="--", label=rf"$\mu_1$, {label}")
        for x, ls in ((r.t_phase1, ":"), (r.t_peak, "-.")):
            a.axvline(x, color=col, ls=ls, lw=1)
        late = r.t > r.t_peak
        tl = r.t[late]
        b.loglog(tl, r.s_star - r.product()[late], color=col, lw=1.5, label=rf"$s^*-2\mu_1\omega_1$, {label}")
        b.loglog(tl, valley_residuals(valley_omega(tl, r.config.loss), r.config.loss)["s_gap"], color=col,
                 ls="--", lw=1, label=r"$\frac{1}{2}s^{*2}cd^3\,w(t)^4$")
    a.set_xlabel("t")
    a.set_title(r"(a) early stage (dotted: end of Phase I; dash-dot: peak of $\omega$)")
    a.legend(fontsize=7, ncol=2)
    b.set_xlabel("t")
    b.set_title("(b) approach to $s^*$ in Phase III")
    b.legend(fontsize=7)
    fig.tight_layout()
    return fig
