"""Figures of the trained heads sweep: circuits model by model and test losses (chapter 2).

* :func:`stacked_circuit_heatmaps` -- :func:`~icl_lib.figures.heatmaps.circuit_heatmaps` of
  several models, one row of panels per model (paper 1, Figures 1a, 2a);
* :func:`loss_strip` -- the test loss of every model by head count, coloured by the pattern it
  ended in, against reference risks (paper 1, Section 3, finding (a)).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import seaborn as sns

from .heatmaps import circuit_heatmaps

__all__ = ["stacked_circuit_heatmaps", "loss_strip", "PATTERN_COLORS"]

PATTERN_COLORS = {"single-head": "C0", "pos/neg": "C2", "single-sign": "C3"}  # by PatternSummary.kind


def stacked_circuit_heatmaps(models: Sequence[tuple], d: int):
    """One sub-figure of :func:`circuit_heatmaps` per model, stacked top to bottom (chapter 2).

    ``models`` holds ``(title, KQ (H, D, D), OV (H, N, D), head_labels)`` per model (any number,
    one included); the figure is as wide as the model with the most heads.  Returns the figure.
    """
    models = list(models)
    if not models:
        raise ValueError("models=[] is invalid: accepted at least one (title, KQ, OV, labels)")
    H_max = max(KQ.shape[0] for _, KQ, _, _ in models)
    fig = plt.figure(figsize=(2.2 * H_max + 1.2, 3.4 * len(models)))
    subs = fig.subfigures(len(models), 1, squeeze=False)[:, 0]  # (n,) also for one model
    for sub, (title, KQ, OV, labels) in zip(subs, models):
        circuit_heatmaps(KQ, OV, d, title=title, head_labels=labels, fig=sub)
    return fig


def loss_strip(models: "pandas.DataFrame", references: Mapping[str, float], ax=None):  # noqa: F821
    """Test ICL loss of every model, one dot per model at its head count, coloured by its
    pattern (columns ``H``, ``test loss``, ``pattern`` of ``models``, as from
    :func:`icl_lib.paper1.sweeps.model_table`), with the ``references`` ``{label: risk}`` as
    horizontal lines (chapter 2).  Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    sns.stripplot(data=models, x="H", y="test loss", hue="pattern", ax=ax, size=7, jitter=0.15,
                  palette=PATTERN_COLORS)
    for k, (label, value) in enumerate(references.items()):
        ax.axhline(value, color="0.3", ls=["--", ":", "-."][k % 3], lw=1, label=f"{label} ({value:.3f})")
    ax.set_ylabel("test ICL loss")
    ax.legend(fontsize=8, loc="upper right")
    return ax
