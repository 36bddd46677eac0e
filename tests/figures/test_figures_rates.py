"""Chapter 8's rate and curvature figures (icl_lib.figures.rates): each draws what its page shows
from the experiment's own output, on made-up numbers of the right shapes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from icl_lib.figures.rates import (curvature_scan_figure, dimension_rate_figure, finite_rate_figure,  # noqa: E402
                                   regulariser_figure)


def test_curvature_scan_shows_the_extremes_and_the_random_median_against_the_lemmas_constants():
    r = torch.logspace(-2, 0, 5)
    scan = {"r": r, "a": torch.rand(5, 7) + 0.6, "b": torch.rand(5, 7) + 1.0, "alpha": torch.tensor(1.2),
            "beta": 0.9, "n_random": 4}
    fig = curvature_scan_figure(scan)
    left, right = fig.axes
    assert np.allclose(left.lines[0].get_ydata(), (scan["a"] / 1.2).min(1).values.numpy())
    assert np.allclose(right.lines[1].get_ydata(), np.median((scan["b"] / 0.9)[:, :4].numpy(), 1))
    assert left.get_xscale() == "log" and right.get_yscale() == "log"
    plt.close(fig)


def test_finite_rate_and_dimension_and_regulariser_figures_draw_their_curves():
    T = 30
    fr = {"finite": torch.linspace(1, 0.1, T + 1)[:, None].repeat(1, 2) + 0.05, "floor": torch.tensor([0.05, 0.06]),
          "population": torch.linspace(1, 1e-6, T + 1)[:, None].repeat(1, 2)}
    fig = finite_rate_figure(fr, n=512)
    (ax,) = fig.axes
    assert len(ax.lines) == 4 and "512" in ax.get_legend().get_texts()[0].get_text()
    assert np.allclose(ax.lines[1].get_ydata(), (fr["finite"][:, 0] - 0.05).numpy())
    plt.close(fig)
    gap = torch.tensor([[0.2, 0.25, 0.22], [0.1, 0.12, 0.11]])
    fig = dimension_rate_figure([4, 8], gap)
    (ax,) = fig.axes
    assert np.allclose(ax.lines[1].get_ydata(), gap.mean(1).numpy()) and len(ax.lines[0].get_xdata()) == 6
    plt.close(fig)
    runs = {"gd_Q": {"excess": torch.rand(T + 1, 5)}, "gd_L": {"excess": torch.rand(T + 1, 5)},
            "level": torch.tensor([0.3])}
    fig = regulariser_figure(runs, ("gd_Q", "gd_L"), 3, {"gd_Q": "GD on Q", "gd_L": "GD on L"})
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["GD on Q", "GD on L", "basin level"] and len(ax.lines) == 2 * 3 + 2 + 1
    plt.close(fig)
