"""Figures of chapter 8 (paper 2) in the book's style (see :mod:`icl_lib.plotting`).

* :func:`excess_curves` -- ``L(theta_t) - L*`` against ``t`` on a log scale, one line per method
  (median over repetitions, band from the smallest to the largest), optional floor and fitted rate;
* :func:`loglog_points` -- measured points with error bars, a fitted power law and reference curves.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import torch

from .plotting import HEAD_COLORS

__all__ = ["excess_curves", "loglog_points"]

_TINY = 1e-32  # below float64 round-off of the excess loss


def _np(t) -> np.ndarray:
    return t.detach().double().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)


def excess_curves(curves: Mapping[str, object], ax=None, floor: float | None = None, floor_label: str = "floor",
                  styles: Mapping[str, str] | None = None, ylabel: str = r"$L(\theta_t) - L^\star$"):
    """Plot ``{label: excess (T+1,) or (T+1, R)}`` on a log scale against the iteration ``t``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    for k, (label, e) in enumerate(curves.items()):
        e = np.clip(_np(e), _TINY, None)
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
    :class:`icl_lib.p2_analysis.Fit` on natural logs) and reference curves ``{label: y_ref(x)}``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.6))
    x, y = _np(x), _np(y)
    color = HEAD_COLORS[color_index % 10]
    ax.errorbar(x, y, yerr=None if yerr is None else _np(yerr), fmt="o", color=color, ms=4, capsize=2, label=label)
    if fit is not None:
        xs = np.geomspace(x.min(), x.max(), 50)
        text = fit_label or f"fit: slope {fit.slope:.2f} ± {fit.slope_se:.2f}"
        ax.plot(xs, np.exp(fit.intercept) * xs**fit.slope, color=color, lw=1.2, label=text)
    styles = ["--", ":", "-.", (0, (5, 1))]
    for k, (lab, yr) in enumerate((references or {}).items()):
        ax.plot(x, _np(yr), color="0.3", ls=styles[k % 4], lw=1.1, label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return ax
