"""Test losses as strip plots (a dot per model) against reference risks.

* :func:`loss_strip`     -- every model's test loss by head count, coloured by its pattern (chapter 2);
* :func:`interval_strip` -- a per-model estimate with its 95 % interval by head count, against the
  values of rival hypotheses (chapter 2: excess over debiased GD, debiasing fraction);
* :func:`task_loss_plot` -- per-task losses by head count, coloured by mode (paper 1, B.4; chapter 7).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

from typing import Mapping

from ..paper1.multitask.head_modes import MODES
from .style import fixed_jitter

__all__ = ["loss_strip", "interval_strip", "task_loss_plot", "PATTERN_COLORS"]

PATTERN_COLORS = {"single-head": "C0", "pos/neg": "C2", "single-sign": "C3", "unformed": "C7"}  # by PatternSummary.kind


def task_loss_plot(losses: "pandas.DataFrame", refs: "pandas.DataFrame", fig=None):  # noqa: F821
    """Per-task test losses of the trained models against the per-task references (chapter 7).

    ``losses``: one row per (model, task) with columns ``H``, ``task`` (1-based), ``loss`` and
    ``mode``; ``refs``: :func:`reference_risks`.  One panel per task: a dot per seed (colour: its
    mode), horizontal lines for the references."""
    tasks = sorted(losses["task"].unique())
    if fig is None:
        fig = plt.figure(figsize=(4.4 * len(tasks) + 2.6, 3.6))
    axes = fig.subplots(1, len(tasks), sharey=True, squeeze=False)[0]
    palette = dict(zip(MODES, sns.color_palette("tab10")))
    present = [m for m in MODES if m in set(losses["mode"])]
    lines = [("Bayes", "-."), ("dGD on support", "--"), ("shared weighted dGD", ":"), ("dGD on all coordinates", (0, (5, 1)))]
    for k, (ax, t) in enumerate(zip(axes, tasks)):
        sub = losses[losses["task"] == t]
        with fixed_jitter(k):
            sns.stripplot(data=sub, x="H", y="loss", hue="mode", palette=palette, hue_order=present, ax=ax, size=7,
                          jitter=0.15, legend=k == 0)
        for name, ls in lines:
            ax.axhline(refs.loc[t, name], color="0.3", ls=ls, lw=1, label=name if k == 0 else None)
        ax.set_title(f"task {t}")
        ax.set_ylabel("per-task test ICL loss")
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].legend().remove()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.80, 0.5), fontsize=8, frameon=False)
    fig.subplots_adjust(right=0.79, wspace=0.08)
    return fig


def interval_strip(models: "pandas.DataFrame", column: str, lines: Mapping[str, float],  # noqa: F821
                   ylabel: str, ax=None):
    """One point per model at its head count (seeds spread side by side), with its interval as an
    error bar (columns ``H``, ``pattern``, ``column``, ``column + " lo"``, ``column + " hi"`` of
    ``models``), coloured by its pattern, and ``lines`` ``{label: value}`` as horizontal lines (the
    rival hypotheses; chapter 2).  Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    heads = sorted(models["H"].unique())
    for H in heads:
        rows = models[models["H"] == H].reset_index(drop=True)
        offsets = (rows.index - (len(rows) - 1) / 2) * (0.6 / max(len(rows), 1))
        for pattern, color in PATTERN_COLORS.items():
            sel = rows["pattern"] == pattern
            if sel.any():
                y = rows.loc[sel, column]
                err = [y - rows.loc[sel, column + " lo"], rows.loc[sel, column + " hi"] - y]
                ax.errorbar(heads.index(H) + offsets[sel], y, yerr=err, fmt="o", ms=4, color=color, lw=1,
                            label=pattern)
    for k, (label, value) in enumerate(lines.items()):
        ax.axhline(value, color="0.3", ls=["--", ":", "-."][k % 3], lw=1, label=f"{label} ({value:.3g})")
    handles, labels = ax.get_legend_handles_labels()
    keep = dict(zip(labels, handles))  # one legend entry per label
    ax.legend(keep.values(), keep.keys(), fontsize=8, loc="best")
    ax.set_xticks(range(len(heads)), [str(H) for H in heads])
    ax.set_xlabel("H")
    ax.set_ylabel(ylabel)
    return ax


def loss_strip(models: "pandas.DataFrame", references: Mapping[str, float], ax=None):  # noqa: F821
    """Test ICL loss of every model, one dot per model at its head count, coloured by its
    pattern (columns ``H``, ``test loss``, ``pattern`` of ``models``, as from
    :func:`icl_lib.paper1.sweeps.model_table`), with the ``references`` ``{label: risk}`` as
    horizontal lines (chapter 2).  Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    with fixed_jitter():
        sns.stripplot(data=models, x="H", y="test loss", hue="pattern", ax=ax, size=7, jitter=0.15,
                      palette=PATTERN_COLORS)
    for k, (label, value) in enumerate(references.items()):
        ax.axhline(value, color="0.3", ls=["--", ":", "-."][k % 3], lw=1, label=f"{label} ({value:.3f})")
    ax.set_ylabel("test ICL loss")
    ax.legend(fontsize=8, loc="upper right")
    return ax
