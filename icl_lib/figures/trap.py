"""The single-sign trap of chapter 9 (tables of :mod:`icl_lib.paper1.phase_diagram.trap` and
:mod:`icl_lib.paper1.phase_diagram.mechanism`).

* :func:`trap_rates`    -- the fraction of seeds in the pattern against the initial scale, one line
  per head count and rate, with exact 95 % intervals and the paper's 0.9;
* :func:`settled_plot`  -- the step from which each run's outcome no longer changes, for the
  stored long runs and the sweep, against the horizon;
* :func:`basin_map`     -- the outcome of the population dynamics over the initial ``(mu_1, mu_2)``
  at ``omega = 0``, with the trained seeds' own starts on top;
* :func:`trap_shares`   -- how many initialisations end trapped on how many of their data streams;
* :func:`trap_laws`     -- the trap rate along each axis of the grid, with its fitted law.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap

from .strips import PATTERN_COLORS

__all__ = ["trap_rates", "settled_plot", "basin_map", "trap_shares", "trap_laws"]

TRAP_COLOR, PATTERN_COLOR = PATTERN_COLORS["single-sign"], PATTERN_COLORS["pos/neg"]
EDGE = 30  # the step at which settled_plot draws runs never in the pattern


def trap_rates(table: pd.DataFrame, threshold: float = 0.9, ax=None):
    """``table`` (:func:`~icl_lib.paper1.phase_diagram.trap.pattern_rates`): the pattern's fraction against the
    initial scale (log axis), one line per ``(H, lr)``, exact 95 % intervals as error bars."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    groups = list(table.groupby(["H", "lr"], sort=False))
    for k, ((H, lr), sub) in enumerate(groups):
        sub = sub.sort_values("init")
        x = sub["init"].to_numpy() * (1 + 0.04 * (k - (len(groups) - 1) / 2))  # side by side
        y = sub["rate"].to_numpy()
        err = np.stack([y - sub["lo"].to_numpy(), sub["hi"].to_numpy() - y])
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"H = {H}, lr = {lr:g}")
    ax.axhline(threshold, color="0.4", ls="--", lw=1, label=f'"consistently": {threshold:g}')
    ax.set_xscale("log")
    ax.set_xlabel("initial scale (x PyTorch's default)")
    ax.set_ylabel("fraction in the pattern")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8, loc="lower left")
    return ax


def settled_plot(stored: pd.DataFrame | None, sweep: pd.DataFrame, horizon: int, ax=None):
    """Per run, the step from which its outcome no longer changes (log axis; runs that were never
    in the pattern are drawn at the left edge): the stored 500,000-step runs (``stored``, by head
    count) and the sweep's runs (``sweep``, by cell), with the horizon and its half."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.4))
    rows = []
    if stored is not None and len(stored):
        for H, sub in stored.groupby("H"):
            rows.append((f"stored, H = {H}", sub))
    for (H, lr, g), sub in sweep.groupby(["H", "lr", "init_scale"], sort=False):
        rows.append((f"H = {H}, lr {lr:g}, init {g:g}", sub))
    rng = np.random.default_rng(0)
    for i, (label, sub) in enumerate(rows):
        s = np.maximum(sub["settled"].to_numpy(), EDGE)
        colors = np.where(sub["pattern"].to_numpy(), PATTERN_COLOR, TRAP_COLOR)
        ax.scatter(s, i + rng.uniform(-0.25, 0.25, len(s)), s=8, c=list(colors), alpha=0.7)
    ax.axvline(horizon, color="k", lw=1)
    ax.axvline(horizon / 2, color="k", lw=1, ls="--")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlim(EDGE / 1.5, horizon * 1.5)
    ax.set_xlabel("step from which the outcome holds (dashed: half the horizon; "
                  "left edge: never in the pattern)", fontsize=8)
    ax.scatter([], [], c=PATTERN_COLOR, s=8, label="pattern")
    ax.scatter([], [], c=TRAP_COLOR, s=8, label="trap")
    ax.legend(fontsize=8, loc="lower right")
    return ax


def basin_map(axis: np.ndarray, maps: Mapping[str, np.ndarray], seeds: pd.DataFrame, fig=None):
    """One panel per population dynamics (``maps``: name -> ``pattern (n, n)`` over the grid
    ``axis`` of initial ``mu_1`` (columns) and ``mu_2`` (rows), at ``omega = 0``): the pattern's
    basin light, the trap's dark; the trained seeds' own ``(mu_1, mu_2)`` at step 0 on top, coloured
    by the outcome of their training."""
    fig = fig or plt.figure(figsize=(3.3 * len(maps), 3.3))
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    cmap = ListedColormap(["#d9c7c0", "#c7d6e6"])  # trap, pattern
    mu0 = np.stack(seeds["mu0"].to_numpy())
    for ax, (name, pattern) in zip(axes, maps.items()):
        ext = [axis[0], axis[-1], axis[0], axis[-1]]
        ax.imshow(pattern.astype(float), origin="lower", extent=ext, cmap=cmap, vmin=0, vmax=1,
                  interpolation="nearest")
        for flag, color, label in ((True, PATTERN_COLOR, "trained: pattern"), (False, TRAP_COLOR, "trained: trap")):
            pick = seeds["pattern"].to_numpy() == flag
            ax.scatter(mu0[pick, 0], mu0[pick, 1], s=14, c=color, edgecolors="k", linewidths=0.4, label=label)
        ax.axhline(0, color="0.3", lw=0.6)
        ax.axvline(0, color="0.3", lw=0.6)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(r"$\mu_1$ at step 0")
        ax.set_ylabel(r"$\mu_2$ at step 0")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def trap_shares(p: Sequence[float], draws: int, ax=None):
    """How the initialisations of chapter 9's crossed design split: for each count ``k`` of trapped
    runs out of an initialisation's ``draws`` data streams, how many initialisations have it
    (``p``: each initialisation's trapped share).  Bars at 0 and ``draws`` are initialisations
    whose outcome the data do not change."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.2))
    k = np.rint(np.asarray(p, dtype=float) * draws).astype(int)
    counts = np.bincount(k, minlength=draws + 1)
    colors = [PATTERN_COLOR if j == 0 else TRAP_COLOR if j == draws else "C7" for j in range(draws + 1)]
    ax.bar(np.arange(draws + 1), counts, color=colors)
    ax.set_xticks(np.arange(draws + 1))
    ax.set_xlabel(f"trapped runs of an initialisation (of {draws} data streams)")
    ax.set_ylabel("initialisations")
    return ax


def trap_laws(laws: Mapping[str, dict], units: Mapping[str, str], fig=None):
    """One panel per axis of chapter 9's grid (:func:`~icl_lib.paper1.phase_diagram.attribution.axis_law`):
    each cell's trap rate with its exact 95 % interval, and the fitted logistic law."""
    n = len(laws)
    if fig is None:
        fig = plt.figure(figsize=(3.2 * n, 3.0))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, (name, law) in zip(axes, laws.items()):
        cells = law["cells"]
        x, y = cells["value"].to_numpy(float), cells["rate"].to_numpy(float)
        err = np.stack([y - cells["lo"].to_numpy(float), cells["hi"].to_numpy(float) - y])
        ax.errorbar(x, y, yerr=err, fmt="o", color=TRAP_COLOR, capsize=3)
        grid = np.linspace(x.min(), x.max(), 100) if units[name] in ("d", "H", "sigma^2") else \
            np.geomspace(x.min(), x.max(), 100)
        t = grid if units[name] in ("d", "H", "sigma^2") else np.log(grid)
        b = law["fit"].params
        ax.plot(grid, 1 / (1 + np.exp(-(b[0] + b[1] * t))), color="k", lw=1)
        if units[name] not in ("d", "H", "sigma^2"):
            ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(name)
        ax.set_title(f"slope {law['slope'].value:.2f} per {units[name]}", fontsize=9)
    axes[0].set_ylabel("trap rate (two heads)")
    fig.tight_layout()
    return fig
