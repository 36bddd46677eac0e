"""Chapter 8's figures of rates and curvature (paper 2): what its page drew by hand before.

* :func:`curvature_scan_figure`   -- the smallest and largest curvature ratios ``a / alpha`` and ``b / beta``
  around the manifold of minima against the distance ``r`` (Lemma 3's constants);
* :func:`finite_rate_figure`      -- the finite-n and population excess losses along the iterations,
  with the finite run's floor (Theorem 2);
* :func:`dimension_rate_figure`   -- ``1 - mu`` per problem and its mean against ``d`` at fixed ``p / d``,
  with a ``1 / d`` reference;
* :func:`regulariser_figure` -- the excess loss of every random start under the two losses compared
  (``Q`` and ``L``), with the basin's level.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .style import as_array

__all__ = ["curvature_scan_figure", "finite_rate_figure", "dimension_rate_figure", "regulariser_figure"]


def curvature_scan_figure(scan: Mapping[str, object]):
    """Chapter 8's curvature scan (paper 2, Lemma 3): ``scan`` of
    :func:`~icl_lib.paper2.experiments.one_point_scan` (``r``, ``a``, ``b`` per distance and
    direction, ``alpha``, ``beta``, ``n_random`` random directions first).  Left: ``a / alpha``, its
    minimum over every direction and its median over the random ones, against ``alpha / 2``;
    right: ``b / beta``, maximum and median, against ``2 beta``."""
    r = as_array(scan["r"])
    a = as_array(scan["a"]) / float(scan["alpha"])
    b = as_array(scan["b"]) / float(scan["beta"])
    k = int(scan["n_random"])
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].plot(r, a.min(1), "o-", label="min over all directions")
    ax[0].plot(r, np.median(a[:, :k], 1), "s--", label="median, random")
    ax[0].axhline(0.5, color="k", ls=":", label=r"$\alpha/2$")
    ax[1].plot(r, b.max(1), "o-", label="max over all directions")
    ax[1].plot(r, np.median(b[:, :k], 1), "s--", label="median, random")
    ax[1].axhline(2.0, color="k", ls=":", label=r"$2\beta$")
    for axis, label in zip(ax, (r"$a/\alpha$", r"$b/\beta$")):
        axis.set_xscale("log")
        axis.set_xlabel(r"$r = \|\theta - \theta(I)\|_P / \|\theta(I)\|_P$")
        axis.set_ylabel(label)
        axis.legend(fontsize=8)
    ax[1].set_yscale("log")
    plt.tight_layout()
    return fig


def finite_rate_figure(rates: Mapping[str, object], n: int):
    """Chapter 8's finite-n rate (paper 2, Theorem 2): the first problem's excess loss with ``n``
    samples (``rates["finite"]``, ``(T+1, R)``), the same minus its floor (``rates["floor"]``), and
    the population oracle's (``rates["population"]``), on a log scale against the iteration."""
    finite, population = as_array(rates["finite"])[:, 0], as_array(rates["population"])[:, 0]
    floor = float(as_array(rates["floor"])[0])
    t = np.arange(len(finite))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(t, finite, label=f"finite $n$ = {n}")
    ax.semilogy(t, finite - floor, ":", label="finite, minus its floor")
    ax.semilogy(t, population, "--", label="population oracle")
    ax.axhline(floor, color="k", lw=0.8, label="floor")
    ax.set_xlabel("iteration $t$")
    ax.set_ylabel(r"$L(\theta_t) - L^\star$")
    ax.legend(fontsize=8)
    return fig


def dimension_rate_figure(dims: Sequence[int], one_minus_mu):
    """Chapter 8's rate against the dimension (paper 2, Theorem 2's ``1 - mu`` of order ``1 / d``):
    ``one_minus_mu`` ``(len(dims), R)``, every problem's point and the mean per ``d`` on log-log
    axes, with a ``1 / d`` line through the first mean."""
    d = np.asarray(dims, dtype=float)
    gap = as_array(one_minus_mu)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(np.repeat(d, gap.shape[1]), gap.reshape(-1), ".", alpha=0.5, label="per problem")
    ax.loglog(d, gap.mean(1), "o-", label="mean")
    ax.loglog(d, gap.mean(1)[0] * d[0] / d, "k:", label=r"$\propto 1/d$")
    ax.set_xticks(d, [str(k) for k in dims])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("$d$ ($p/d$ fixed)")
    ax.set_ylabel(r"$1 - \mu$")
    ax.legend(fontsize=8)
    return fig


def regulariser_figure(runs: Mapping[str, object], pair: Sequence[str], starts: int, labels: Mapping[str, str]):
    """Chapter 8's regulariser comparison (paper 2, the loss ``Q`` against ``L``): the excess loss
    ``runs[m]["excess"]`` of the first ``starts`` random starts of each method of ``pair`` (solid,
    dashed; named by ``labels``), with the basin's level ``runs["level"]`` dotted."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for k, (m, style) in enumerate(zip(pair, ("-", "--"))):
        ax.semilogy(as_array(runs[m]["excess"])[:, :starts], style, color=f"C{k}", lw=0.8)
        ax.plot([], [], style, color=f"C{k}", label=labels[m])
    ax.axhline(float(as_array(runs["level"])[0]), color="k", lw=0.8, ls=":", label="basin level")
    ax.set_xlabel("iteration $t$")
    ax.set_ylabel(r"$L(\theta_t) - L^\star$")
    ax.legend(fontsize=8)
    return fig
