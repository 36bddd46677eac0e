"""Stacked heatmaps, chapter 8's figures and the heads sweep of chapter 2 (icl_lib.figures)."""

import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib.paper2.fits import Fit
from icl_lib.figures import loss_strip, stacked_circuit_heatmaps
from icl_lib.figures.strips import PATTERN_COLORS
from tests.figures.figures_common import _hlines



# ------------------------------------------------------------------------- stacked heatmaps
def test_stacked_circuit_heatmaps_one_sub_figure_per_model_even_for_one(gen):
    """One sub-figure per model (a single model included: fig.subfigures(1, 1) is not a list), each with
    that model's heads, title and labels; a model with fewer heads gets fewer panels."""
    from icl_lib.figures.heatmaps import stacked_circuit_heatmaps

    KQ3, OV3 = torch.randn(3, 8, 8, generator=gen), torch.randn(3, 2, 8, generator=gen)
    KQ1, OV1 = torch.randn(1, 8, 8, generator=gen), torch.randn(1, 2, 8, generator=gen)
    fig = stacked_circuit_heatmaps([(KQ3, OV3, "H = 3", ["a", "b", "c"])], 6)
    assert len(fig.subfigs) == 1 and fig.subfigs[0].get_suptitle() == "H = 3"
    panels = [ax for ax in fig.subfigs[0].axes if ax.images]
    assert len(panels) == 6 and [ax.get_title() for ax in panels[:3]] == ["KQ, a", "KQ, b", "KQ, c"]
    np.testing.assert_allclose(panels[4].images[0].get_array(), OV3[1].numpy())
    fig = stacked_circuit_heatmaps([(KQ1, OV1, "H = 1", None), (KQ3, OV3, "H = 3", None)], 6)
    assert [sf.get_suptitle() for sf in fig.subfigs] == ["H = 1", "H = 3"]
    assert [sum(1 for ax in sf.axes if ax.images) for sf in fig.subfigs] == [2, 6]
    assert fig.get_size_inches() == pytest.approx((2.2 * 3 + 1.2, 3.9 * 2))
    with pytest.raises(ValueError, match="models=\\[\\] is invalid"):
        stacked_circuit_heatmaps([], 6)


# ------------------------------------------------------------------------- chapter 8's figures
def _gap_result(L, gaps):
    g = torch.tensor(gaps, dtype=torch.float64)[:, None]
    return {"n": torch.tensor([16.0, 32, 64, 128], dtype=torch.float64), "gap": g, "L_hat": g + L,
            "se": 0.1 * g, "L": torch.tensor([L], dtype=torch.float64)}


def test_population_gap_figure_shows_the_monte_carlo_the_limit_and_the_fitted_gap():
    """Left: E L_hat with 2-se error bars and the dashed L per point; right: the gap on log-log axes with its fit."""
    from icl_lib.figures.curves import population_gap_figure

    gap = {"min": _gap_result(0.5, [0.08, 0.04, 0.02, 0.01]), "pert": _gap_result(0.7, [0.1, 0.05, 0.025, 0.0125])}
    fits = {k: Fit(-1.0, np.log(1.28), 0.01, 0.1, 1.0, 3) for k in gap}
    fig = population_gap_figure(gap, fits, n_min=32)
    left, right = fig.axes
    assert sorted(_hlines(left)) == [0.5, 0.7] and left.get_xscale() == "log"
    assert len(left.containers) == 2 and len(right.containers) == 2
    np.testing.assert_allclose(left.containers[0].lines[0].get_ydata(), [0.58, 0.54, 0.52, 0.51])
    labels = [ln.get_label() for ln in right.lines]
    assert labels.count("fit n >= 32: slope -1.000 ± 0.010") == 2
    assert right.get_xscale() == "log" and right.get_yscale() == "log"


def test_method_comparison_figure_two_panels_and_the_floor():
    from icl_lib.figures.curves import method_comparison_figure

    pop = {"a": np.array([1.0, 0.1, 0.01]), "b": np.array([1.0, 0.5, 0.25])}
    fin = {"a": np.array([1.0, 0.2, 0.2]), "b": np.array([1.0, 0.6, 0.3])}
    fig = method_comparison_figure(pop, fin, 0.2, "finite n")
    left, right = fig.axes
    assert [ln.get_label() for ln in left.lines] == ["a", "b"] and _hlines(left) == []
    assert _hlines(right) == [0.2] and right.get_title() == "finite n"
    assert "population" in left.get_title()
    np.testing.assert_allclose(right.lines[1].get_ydata(), [1.0, 0.6, 0.3])


def test_kappa_rate_figure_mean_and_standard_error_over_problems():
    from icl_lib.figures.curves import kappa_rate_figure

    om = torch.tensor([[0.2, 0.4], [0.1, 0.3], [0.05, 0.15]], dtype=torch.float64)  # (kappas, R)
    fit = Fit(-0.5, 0.0, 0.01, 0.1, 1.0, 3)
    fig = kappa_rate_figure(np.array([1.0, 4.0, 16.0]), {"m": om}, {"m": fit})
    (ax,) = fig.axes
    bars = ax.containers[0]
    np.testing.assert_allclose(bars.lines[0].get_ydata(), [0.3, 0.2, 0.1])
    seg = bars.lines[2][0].get_segments()  # error bar of the first kappa: mean +- sd / sqrt(R)
    se = 0.1  # sd of (0.2, 0.4) is 0.1 sqrt(2), over sqrt(R = 2)
    assert seg[0][:, 1] == pytest.approx([0.3 - se, 0.3 + se])
    assert any(ln.get_label() == "slope -0.50 ± 0.01" for ln in ax.lines)


def test_saddle_figure_plateau_and_predicted_escape_line():
    from icl_lib.figures.curves import saddle_figure

    curves = {"GD": np.array([0.01, 0.009, 1e-4]), "fin": np.array([0.01, 1e-3, 1e-5])}
    x_log, t_esc = np.array([1.0, 2.0, 3.0]), np.array([3, 10, 14])
    fig = saddle_figure(curves, 0.01, x_log, t_esc, 4.0, styles={"fin": ":"})
    left, right = fig.axes
    assert _hlines(left) == [0.01] and left.get_ylim()[1] == pytest.approx(0.03)
    assert next(ln for ln in left.lines if ln.get_label() == "fin").get_linestyle() == ":"
    pred = next(ln for ln in right.lines if ln.get_label() == "predicted slope 4.00")
    np.testing.assert_allclose(pred.get_ydata(), 12 + 4.0 * (x_log - 2.5))  # through the mean of points 2..


def test_loglog_positive_points_drops_what_log_axes_cannot_show():
    """Points (and the matching reference values) that are not positive and finite are left out; with
    none left the axes carry a note and stay linear instead of failing to draw."""
    from icl_lib.figures.curves import loglog_positive_points

    x, y = np.array([1.0, 2.0, 4.0, 8.0]), np.array([1.0, np.nan, -0.5, 0.125])
    ax = loglog_positive_points(x, y, yerr=0.1 * np.abs(y), references={"ref": 1 / x}, label="pts")
    np.testing.assert_allclose(ax.containers[0].lines[0].get_xdata(), [1.0, 8.0])
    ref = next(ln for ln in ax.lines if ln.get_label() == "ref")
    np.testing.assert_allclose(ref.get_ydata(), [1.0, 0.125])
    assert ax.get_yscale() == "log"
    ax = loglog_positive_points(x, np.full(4, np.nan), label="floor", ylabel="excess")
    assert ax.get_yscale() == "linear" and "floor: no positive finite value" in ax.texts[0].get_text()
    ax.figure.canvas.draw()  # draws without "Data cannot be log-scaled"
    ax = loglog_positive_points(x, 1 / x)  # all valid: loglog_points itself
    np.testing.assert_allclose(ax.containers[0].lines[0].get_ydata(), 1 / x)


@pytest.mark.parametrize("Hs", [[3], [1, 2, 4]])
def test_stacked_circuit_heatmaps_one_subfigure_per_model_also_for_one(gen, Hs):
    """One model gives one sub-figure (fig.subfigures squeezes a single one: no iteration over it);
    each shows its own circuits and title; the width follows the model with the most heads."""
    models = [(torch.randn(H, 5, 5, generator=gen, dtype=torch.float64),
               torch.randn(H, 1, 5, generator=gen, dtype=torch.float64), f"H = {H}", [f"h{h}" for h in range(H)])
              for H in Hs]
    fig = stacked_circuit_heatmaps(models, 4, row_height=3.4)
    assert len(fig.subfigs) == len(Hs)
    assert fig.get_size_inches() == pytest.approx((2.2 * max(Hs) + 1.2, 3.4 * len(Hs)))
    for sub, (KQ, OV, title, labels) in zip(fig.subfigs, models):
        assert sub.get_suptitle() == title
        panels = [ax for ax in sub.axes if ax.images]
        assert len(panels) == 2 * KQ.shape[0]
        np.testing.assert_allclose(panels[-1].images[0].get_array(), OV[-1].numpy())
        assert panels[0].get_title() == f"KQ, {labels[0]}"
    with pytest.raises(ValueError, match=r"^models="):
        stacked_circuit_heatmaps([], 4)


def test_loss_strip_a_dot_per_model_coloured_by_pattern_and_the_references():
    models = pd.DataFrame({"H": [1, 1, 2, 2, 3], "test loss": [0.5, 0.45, 0.3, 0.31, 0.29],
                           "pattern": ["single-head", "single-head", "pos/neg", "single-sign", "pos/neg"]})
    refs = {"a": 0.4, "b": 0.28, "c": 0.2}
    ax = loss_strip(models, refs)
    assert sorted(_hlines(ax)) == pytest.approx([0.2, 0.28, 0.4])
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    assert sorted(points[:, 1]) == pytest.approx(sorted(models["test loss"]))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"single-head", "pos/neg", "single-sign", "a (0.400)"} <= set(labels)
    assert set(PATTERN_COLORS) == {"single-head", "pos/neg", "single-sign", "unformed"}  # the outcomes of a run
    ax2 = loss_strip(models[models.H == 3], refs)  # one head count, one pattern
    assert len(np.concatenate([c.get_offsets() for c in ax2.collections])) == 1


def test_interval_strip_a_point_and_error_bar_per_model_and_the_rivals():
    """Every model's value at its head count with its interval as the error bar, coloured by its
    pattern; the rival hypotheses as horizontal lines; one legend entry per label."""
    from icl_lib.figures import interval_strip

    models = pd.DataFrame({"H": [2, 2, 2, 4], "pattern": ["pos/neg", "pos/neg", "single-sign", "pos/neg"],
                           "t": [1.0, 0.9, 0.2, 1.1], "t lo": [0.95, 0.8, 0.0, 1.0], "t hi": [1.05, 1.0, 0.4, 1.2]})
    ax = interval_strip(models, "t", {"debiased GD": 1.0, "vanilla GD": 0.0}, ylabel="t")
    assert sorted(_hlines(ax)) == pytest.approx([0.0, 1.0])
    ys = sorted(y for c in ax.containers for y in c.lines[0].get_ydata())
    assert ys == pytest.approx(sorted(models["t"]))
    bars = [seg for c in ax.containers for seg in c.lines[2][0].get_segments()]
    np.testing.assert_allclose(sorted((s[0][1], s[1][1]) for s in bars), sorted(zip(models["t lo"], models["t hi"])))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == sorted(["pos/neg", "single-sign", "debiased GD (1)", "vanilla GD (0)"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]


def test_strip_plots_are_the_same_at_every_build():
    """Seaborn jitters strip plots with numpy's global random state: the figures seed it (and
    restore it), so two draws of the same data put every dot at the same place."""
    from icl_lib.figures import loss_strip

    models = pd.DataFrame({"H": [1, 1, 2, 2], "test loss": [0.5, 0.45, 0.3, 0.31],
                           "pattern": ["single-head", "single-head", "pos/neg", "pos/neg"]})
    np.random.seed(1)
    before = np.random.get_state()[1].copy()
    a = np.concatenate([c.get_offsets() for c in loss_strip(models, {"a": 0.4}).collections])
    assert np.array_equal(np.random.get_state()[1], before)  # the global state is left as it was
    np.random.uniform()  # another state: the figure must not depend on it
    b = np.concatenate([c.get_offsets() for c in loss_strip(models, {"a": 0.4}).collections])
    assert np.array_equal(a, b)
