"""Training-stage figures of chapter 3 (paper 1, Section 4.2; Figures 1b, 2b-c, 12).

* :func:`stage_dynamics_figure` -- ``omega_h`` over the whole run and its start, and ``mu_h``, one
  row per run, with the detected stage boundaries marked;
* :func:`stage_timeline`        -- one line per run: where pattern (3.1), Stage I and Stage II are
  established;
* :func:`gd_comparison_figure`  -- ``omega_h`` and ``mu_h`` of a trained run next to gradient descent
  on (4.1) from the same start (Figure 20);
* :func:`optimality_figure`     -- ``eta / s*`` along every run (the transitional optimality (4.3)) and
  the slide of the group OV weight against the KQ scale along the solution manifold (4.5).
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..paper1.dynamics.slide import eta_history, manifold_scales
from ..paper1.dynamics.stage_detection import StageSummary
from .curves import dynamics
from .style import HEAD_COLORS

__all__ = ["stage_dynamics_figure", "stage_timeline", "gd_comparison_figure", "optimality_figure"]


def stage_dynamics_figure(items: Sequence[tuple[str, "StageSummary"]], zoom_step: int):
    """Paper 1, Figures 1b, 2b-c, 12: ``omega_h`` over the whole run, ``omega_h`` over the first
    ``zoom_step`` steps, and ``mu_h``; one row per ``(title, StageSummary)``, the detected steps
    marked.  Chapter 3."""
    fig, axes = plt.subplots(len(items), 3, figsize=(14, 3.3 * len(items)), squeeze=False, constrained_layout=True)
    for row, (title, st) in zip(axes, items):
        labels = st.head_labels()
        early = st.steps <= zoom_step
        marks = st.merged_marks()
        dynamics(st.steps, st.omega, r"$\omega_h$", ax=row[0], labels=labels, marks=marks)
        dynamics(st.steps[early], st.omega[early], r"$\omega_h$", ax=row[1], labels=labels,
                 marks={k: v for k, v in marks.items() if v <= zoom_step})
        dynamics(st.steps, st.mu, r"$\mu_h$", ax=row[2], labels=labels, marks=marks)
        row[0].set_title(f"{title}: KQ scale")
        row[1].set_title(f"{title}: KQ scale, first {zoom_step} steps")
        row[2].set_title(f"{title}: OV entry")
        for ax in row[1:]:
            ax.get_legend().remove()
    return fig


def stage_timeline(items: Sequence[tuple[str, "StageSummary"]], last_step: int, ax=None):
    """One line per run: the steps at which pattern (3.1), Stage I and Stage II are established
    (a missing marker: not established within the run).  Chapter 3."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(items) + 1.2))
    styles = {"(3.1)": ("s", "C7", "pattern (3.1)"), "I": ("o", "C0", "Stage I"), "II": ("D", "C3", "Stage II")}
    seen = set()
    for y, (label, st) in enumerate(items):
        ax.axhline(y, color="0.85", lw=0.8, zorder=0)
        for name, x in st.marks().items():
            mk, col, text = styles[name]
            ax.scatter(max(x, 1), y, marker=mk, color=col, s=40, zorder=3, label=None if name in seen else text)
            seen.add(name)
    ax.set_yticks(range(len(items)), [lab for lab, _ in items], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1, last_step * 1.3)
    ax.invert_yaxis()
    ax.set_xlabel("training step (established from here to the end)")
    if seen:  # no legend when no run established anything
        ax.legend(fontsize=8, loc="lower left")
    return ax


def gd_comparison_figure(full: "StageSummary", gd: "StageSummary", titles: Sequence[str]):
    """Paper 1, Figure 20: ``omega_h`` (top) and ``mu_h`` (bottom) of the full model trained with
    Adam (left, :class:`StageSummary` ``full``) and of gradient descent on (4.1) from the same
    start (right, ``gd``), each with the steps of its detected stages marked (pattern (3.1) alone is
    not marked for GD: it holds by construction); ``titles`` head the two columns.  Chapter 3."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 6.5), constrained_layout=True)
    marks_gd = {k: v for k, v in gd.merged_marks().items() if k != "(3.1)"}
    for col, (st, mk) in enumerate([(full, full.merged_marks()), (gd, marks_gd)]):
        for row, (vals, name) in enumerate([(st.omega, r"$\omega_h$"), (st.mu, r"$\mu_h$")]):
            dynamics(st.steps, vals, name, ax=axes[row, col], labels=st.head_labels(), marks=mk, logx=True)
            axes[row, col].set_xlim(0, st.steps[-1] * 1.2)
            if col == 1:
                axes[row, col].set_xlabel("gradient-descent step")
    axes[0, 0].set_title(titles[0])
    axes[0, 1].set_title(titles[1])
    return fig


def optimality_figure(rows: Sequence[tuple[int, Sequence["StageSummary"], Sequence, Sequence[int]]],
                      s_star: float, tol: float, rival: float | None = None):
    """Paper 1, Section 4.2, eqs. (4.3) and (4.5): one row per head count, from ``(H, [StageSummary
    per run], [slide start step or None per run], [seed per run])``.  Left: ``eta(t) / s*`` of every run against
    the training step (log axis), with the band ``1 +- tol`` and, if given, the rival value
    ``rival`` (dashed).  Right: ``log mu_bar`` against ``log omega_bar`` of every run from its
    slide start to the end (dots: the start), each with a line of slope -1 through its start (the
    manifold's prediction).  Chapter 3."""
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 3.2 * len(rows)), squeeze=False, constrained_layout=True)
    for (H, sts, starts, seeds), (ax_e, ax_m) in zip(rows, axes):
        for k, (st, start, seed) in enumerate(zip(sts, starts, seeds)):
            col = HEAD_COLORS[k % 10]
            ratio = eta_history(st) / s_star
            steps = np.maximum(np.asarray(st.steps, dtype=float), 1.0)
            ax_e.plot(steps, ratio, color=col, lw=1.1, label=f"seed {seed}" if k < 10 else None)
            if start is None or not np.isfinite(start):  # no slide measured in this run
                continue
            keep = np.asarray(st.steps) >= start
            w, m = manifold_scales(st)
            lw, lm = np.log(w[keep]), np.log(m[keep])
            ax_m.plot(lw, lm, color=col, lw=1.1)
            ax_m.scatter(lw[:1], lm[:1], color=col, s=18, zorder=3)
            span = np.array([lw.min(), lw.max()])
            ax_m.plot(span, lm[0] - (span - lw[0]), color=col, lw=0.8, ls=":")
        ax_e.axhspan(1 - tol, 1 + tol, color="0.9", zorder=0)
        ax_e.axhline(1.0, color="k", lw=0.8)
        if rival is not None:
            ax_e.axhline(rival, color="C3", lw=0.9, ls="--", label=r"rival: $\sum_h\mu_h\omega_h = 1$")
        ax_e.set_xscale("log")
        ax_e.set_ylim(-0.05, max(1.3, (rival or 0) + 0.1))
        ax_e.set_xlabel("training step")
        ax_e.set_ylabel(r"$\eta / s^*$")
        ax_e.set_title(f"H = {H}: transitional optimality (4.3)")
        ax_e.legend(fontsize=7, ncol=2, loc="lower right")
        ax_m.set_xlabel(r"$\log \bar\omega$ (mean $|\omega_h|$ of the live heads)")
        ax_m.set_ylabel(r"$\log \bar\mu$ (group OV weight)")
        ax_m.set_title(f"H = {H}: slide along the manifold (4.5); dotted: slope -1")
    return fig
