"""The grid of chapter 9: where each solution emerges (tables of :mod:`icl_lib.paper1.phase_diagram.grid`).

* :func:`phase_maps`      -- outcome fractions as heatmaps over two axes, one panel per value of a
  third, one row per outcome, each cell annotated with its count of seeds;
* :func:`eta_scatter`     -- the learned rate ``eta`` against ``eta*(d, L, sigma^2)`` for every
  cell on one scatter: every seed, the per-cell medians with their intervals, the identity line;
* :func:`time_to_pattern` -- the step at which the pattern forms against d, L (or any axis) on log
  axes, seeds that never reach it at the step budget, cell medians and the fitted power law.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..paper1.phase_diagram.grid import AXES
from ..paper1.phase_diagram.outcomes import OUTCOMES
from ..validate import check_choice, fail
from .strips import PATTERN_COLORS

__all__ = ["phase_maps", "eta_scatter", "time_to_pattern", "OUTCOME_COLORS", "AXIS_LABELS"]

OUTCOME_COLORS = {**PATTERN_COLORS, "unformed": "0.6"}  # by phase.OUTCOMES
AXIS_LABELS = {"H": "heads H", "d": "d", "L": "L", "sigma2": r"$\sigma^2$", "lr": "Adam lr",
               "init_scale": "init scale"}


def _possible(outcome: str, H: int) -> bool:
    """Whether a model with H heads can end in ``outcome`` (one head: only single-head/unformed)."""
    if outcome == "single-head":
        return H == 1
    if outcome in ("pos/neg", "single-sign"):
        return H >= 2
    return True


def _fmt(v) -> str:
    return f"{v:g}"


def phase_maps(cells: pd.DataFrame, x: str, y: str, panel: str, outcomes: Sequence[str] = ("pos/neg", "single-sign"),
               fixed: Mapping[str, float] | None = None, min_cells: int = 1, fig=None):
    """Heatmaps of the fraction of seeds in each of ``outcomes`` (one row of panels per outcome)
    over axes ``x`` and ``y``, one column of panels per value of ``panel``, from
    :func:`~icl_lib.paper1.phase_diagram.outcomes.cell_table`'s ``cells`` restricted to the rows whose other axes
    equal ``fixed``.  Each cell shows ``k/n`` seeds; a cell not in the grid is blank, an outcome
    impossible at its head count shows "-".  Panels with fewer than ``min_cells`` cells are left
    out (all of them if none has as many).  Returns the figure."""
    for name, axis in (("x", x), ("y", y), ("panel", panel)):
        check_choice(name, axis, AXES)
    if len({x, y, panel}) != 3:
        fail("panel", panel, f"an axis other than x={x!r} and y={y!r}")
    for o in outcomes:
        check_choice("outcomes", o, OUTCOMES)
    sub = cells
    for axis, value in (fixed or {}).items():
        sub = sub[np.isclose(sub[check_choice("fixed", axis, AXES)], value)]
    if sub.duplicated([x, y, panel]).any():
        fail("fixed", dict(fixed or {}), f"values of the axes other than {x}, {y}, {panel} that leave one row per cell")
    values = sorted(sub[panel].unique())
    if not values:
        fail("cells", f"0 rows after fixed={dict(fixed or {})}", "at least one cell")
    panels = [p for p in values if (sub[panel] == p).sum() >= min_cells] or values  # none that full: all
    xs, ys = sorted(sub[x].unique()), sorted(sub[y].unique())
    if fig is None:
        fig = plt.figure(figsize=(0.8 * len(xs) * len(panels) + 2.4, 0.6 * len(ys) * len(outcomes) + 1.6),
                         layout="constrained")
    axes = fig.subplots(len(outcomes), len(panels), squeeze=False)
    image = None
    for i, o in enumerate(outcomes):
        for j, p in enumerate(panels):
            ax = axes[i, j]
            frac = np.full((len(ys), len(xs)), np.nan)
            for _, row in sub[sub[panel] == p].iterrows():
                a, b = ys.index(row[y]), xs.index(row[x])
                H = row["H"]
                if _possible(o, H):
                    frac[a, b] = row[f"k {o}"] / row["seeds"]
                    text = f"{row[f'k {o}']}/{row['seeds']}"
                else:
                    text = "-"
                ax.text(b, a, text, ha="center", va="center", fontsize=7,
                        color="white" if np.isfinite(frac[a, b]) and frac[a, b] < 0.5 else "black")
            image = ax.imshow(np.ma.masked_invalid(frac), vmin=0, vmax=1, cmap="viridis", aspect="auto",
                              origin="lower")
            ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs], fontsize=7)
            ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys], fontsize=7)
            ax.grid(False)
            ax.set_title(f"{o}, {AXIS_LABELS[panel]} = {_fmt(p)}", fontsize=8)
            if i == len(outcomes) - 1:
                ax.set_xlabel(AXIS_LABELS[x])
            if j == 0:
                ax.set_ylabel(AXIS_LABELS[y])
    fig.colorbar(image, ax=axes, shrink=0.8, label="fraction of seeds")
    return fig


def eta_scatter(models: pd.DataFrame, cells: pd.DataFrame, ax=None):
    """The learned rate ``eta`` of every run (dots coloured by outcome, columns ``eta*``, ``eta``,
    ``outcome`` of :func:`~icl_lib.paper1.phase_diagram.outcomes.grid_models`) against Theorem 4.2 (ii)'s
    ``eta*`` of its cell, the per-cell median of the positive/negative runs with its interval
    (black, from the ``eta/eta*-1`` estimates of :func:`~icl_lib.paper1.phase_diagram.outcomes.cell_table`) and the
    identity ``eta = eta*``.  Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 4.6))
    for o in OUTCOMES:
        m = models[models["outcome"] == o]
        if len(m):
            ax.scatter(m["eta*"], m["eta"], s=12, alpha=0.55, color=OUTCOME_COLORS[o], label=f"{o} ({len(m)} runs)",
                       zorder=2)
    est = [(row["eta*"], row["eta/eta*-1"]) for _, row in cells.iterrows() if np.isfinite(row["eta/eta*-1"].value)]
    if est:
        xs = np.array([e[0] for e in est])
        mid = np.array([e[0] * (1 + e[1].value) for e in est])
        lo = np.array([e[0] * (1 + max(e[1].lo, -1.0)) for e in est])  # an unbounded interval drawn to eta = 0
        hi = np.array([e[0] * (1 + min(e[1].hi, 1.0)) for e in est])  # ... and to 2 eta*
        ax.errorbar(xs, mid, yerr=[mid - lo, hi - mid], fmt="o", color="black", ms=4, capsize=3, lw=1,
                    label="cell mean (pos/neg runs), 95% t interval", zorder=3)
    values = np.concatenate([models["eta*"].to_numpy(), models["eta"].to_numpy()])
    lo_v, hi_v = float(np.nanmin(values)), float(np.nanmax(values))
    pad = 0.05 * (hi_v - lo_v or 1.0)
    line = np.array([lo_v - pad, hi_v + pad])
    ax.plot(line, line, color="0.3", ls="--", lw=1, label=r"$\eta = \eta^*$", zorder=1)
    ax.set_xlabel(r"$\eta^*(d, L, \sigma^2) = 1/(1 + (1+\sigma^2) d/L)$")
    ax.set_ylabel(r"learned $\eta = \sum_h \mu_h \omega_h$")
    ax.legend(fontsize=7, loc="upper left")
    return ax


def time_to_pattern(models: Mapping[str, pd.DataFrame], fits: Mapping[str, dict], budget: int, fig=None):
    """Time to the pattern against one axis per panel, log-log: ``models`` maps a panel's x column
    (``"d"``, ``"L"``, ...) to the runs along it (rows of :func:`~icl_lib.paper1.phase_diagram.outcomes.grid_models`);
    every run that reached the pattern is a dot, one that did not is a triangle at the ``budget``;
    the per-value median over all runs (censored ones included) with the ends of its
    order-statistic interval that the seeds bound; and the power law of ``fits[axis]``
    (:func:`~icl_lib.paper1.phase_diagram.outcomes.time_scaling`), labelled with its slope and interval.
    Returns the figure."""
    from ..stats import censored_median_ci

    if not models:
        fail("models", {}, "at least one panel {axis: runs}")
    if fig is None:
        fig = plt.figure(figsize=(4.2 * len(models) + 0.6, 3.8), layout="constrained")
    axes = fig.subplots(1, len(models), sharey=True, squeeze=False)[0]
    for k, (ax, (axis, m)) in enumerate(zip(axes, models.items())):
        col = axis.split(" ")[0]  # "d (d/L = 1/8)": the runs' column d, another panel title
        if col not in m:
            fail("models", axis, "panels keyed by a column of their runs (then, optionally, a space and a note)")
        t = m["t_pattern"].astype(float)
        reached = m[t.notna()]
        missed = m[t.isna()]
        rng = np.random.default_rng(k)  # the same jitter at every build
        jit = np.exp(rng.uniform(-0.04, 0.04, len(reached)))
        ax.scatter(reached[col] * jit, np.maximum(reached["t_pattern"].astype(float), 1.0), s=12, alpha=0.6,
                   color="C0", label=f"reached ({len(reached)} runs)")
        if len(missed):
            ax.scatter(missed[col], np.full(len(missed), float(budget)), marker="^", s=22, color="C3",
                       label=f"not within {budget} steps ({len(missed)})")
        label = "median of all runs (95% interval where the seeds bound it)"
        for v, g in m.groupby(col):
            e = censored_median_ci(list(g["t_pattern"]))
            if math.isfinite(e.value):  # an unbounded end (too few seeds, or censored) is not drawn
                down = e.value - e.lo if math.isfinite(e.lo) else 0.0
                up = e.hi - e.value if math.isfinite(e.hi) else 0.0
                ax.errorbar([v], [max(e.value, 1.0)], yerr=[[max(down, 0.0)], [max(up, 0.0)]], fmt="s",
                            color="black", ms=5, capsize=3, lw=1, zorder=3, label=label)
                label = None
        fit = fits.get(axis)
        if fit is not None and math.isfinite(fit["slope"].value):
            xs = np.geomspace(m[col].min(), m[col].max(), 20)
            s = fit["slope"]
            ax.plot(xs, np.exp(fit["intercept"]) * xs ** s.value, color="C1", lw=1.5,
                    label=f"fit: slope {s.value:.2f} [{s.lo:.2f}, {s.hi:.2f}]")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(AXIS_LABELS.get(col, col))
        ax.set_title(axis, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("step at which the pattern forms")
    return fig
