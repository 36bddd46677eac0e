"""The figures of chapters 3, 5 and 6 (icl_lib.figures)."""

import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib import DataConfig
from icl_lib.config import ModelConfig, RunSpec
from icl_lib.engine import Run
from icl_lib.figures import gd_comparison_figure, landscape_panels, norm_violins, stage_timeline, valley_figure
from tests.figures.figures_common import _hlines, _stage_summary, _vlines



# ------------------------------------------------------------------------------------- chapter 6
def _two_head_run(blocks, mus, d=3, rho=0.5, seed=2):
    """A Run with final circuits KQ_h[:d, :d] = blocks[h], OV_h = (0.., mu_h)."""
    D = d + 1
    KQ = torch.zeros(1, 2, D, D, dtype=torch.float64)
    KQ[0, :, :d, :d] = torch.stack([torch.as_tensor(b, dtype=torch.float64) for b in blocks])
    OV = torch.zeros(1, 2, 1, D, dtype=torch.float64)
    OV[0, :, 0, d] = torch.tensor(mus, dtype=torch.float64)
    spec = RunSpec(data=DataConfig(d=d, L=10, rho=rho), model=ModelConfig(heads=2), seed=seed)
    return Run(spec=spec, params={}, history={"step": torch.tensor([0]), "KQ": KQ, "OV": OV})


def test_pattern_with_matrices_circuits_left_and_the_matrices_right():
    """Two sub-figures: the run's KQ/OV panels titled with the heads' groups under a title naming rho,
    the seed and the pattern; one annotated panel per reference matrix."""
    from icl_lib.figures import pattern_with_matrices

    run = _two_head_run([torch.eye(3), -torch.eye(3)], [1.0, -1.0])
    mats = {"A": torch.eye(3), "B": 2 * torch.eye(3)}
    fig = pattern_with_matrices(run, mats)
    left, right = fig.subfigs
    assert left.get_suptitle() == "rho = 0.5, seed 2: pos/neg"
    assert [ax.get_title() for ax in left.axes if ax.images][:2] == ["KQ, head 1 (positive)", "KQ, head 2 (negative)"]
    assert [ax.get_title() for ax in right.axes] == ["A", "B"]
    assert pattern_with_matrices(run, mats, "mine").subfigs[0].get_suptitle() == "mine: pos/neg"


def test_inverse_heatmaps_show_the_scaled_inverses_and_their_distances():
    """Panels: each head's KQ block inverted and divided by its mean diagonal, Sigma, and Gamma*^{-1}
    scaled the same way; the titles give the distances, one colour scale for all."""
    from icl_lib.figures import inverse_heatmaps

    S = torch.tensor([[1.0, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 1.0]], dtype=torch.float64)
    G = torch.linalg.inv(S + 0.2 * torch.eye(3, dtype=torch.float64))
    run = _two_head_run([0.3 * G, -0.6 * torch.linalg.inv(S)], [1.0, -1.0])
    fig = inverse_heatmaps(run.KQ, 3, S, G)
    assert len(fig.axes) == 4
    shown = [np.asarray(ax.collections[0].get_array()).reshape(3, 3) for ax in fig.axes]
    scaled = (S + 0.2 * torch.eye(3, dtype=torch.float64)).numpy() / 1.2
    np.testing.assert_allclose(shown[0], scaled, atol=1e-12)
    np.testing.assert_allclose(shown[1], S.numpy(), atol=1e-12)
    np.testing.assert_allclose(shown[2], S.numpy())
    np.testing.assert_allclose(shown[3], scaled, atol=1e-12)
    d_star = np.linalg.norm(scaled - S.numpy()) / np.linalg.norm(S.numpy())
    assert fig.axes[0].get_title().endswith(f"to $\\Sigma$ {d_star:.3f}, to $\\Gamma^{{\\star-1}}$ 0.000")
    d_other = np.linalg.norm(S.numpy() - scaled) / np.linalg.norm(scaled)
    assert fig.axes[1].get_title().endswith(f"to $\\Sigma$ 0.000, to $\\Gamma^{{\\star-1}}$ {d_other:.3f}")
    assert fig.axes[3].get_title().endswith(f"d to $\\Sigma$ {d_star:.3f}")
    vmax = max(np.abs(m).max() for m in shown)
    assert all(ax.collections[0].get_clim() == pytest.approx((-vmax, vmax)) for ax in fig.axes)


def test_head_split_curves_one_colour_per_rho_and_the_thresholds():
    """Per shown rho: a thin line per seed and a thick median on both panels, in colour k of the
    entry's position (a None entry keeps its colour unused); dashed thresholds where given."""
    from icl_lib.figures import HEAD_COLORS, head_split_curves

    steps = np.array([0, 10, 20])
    h = {"step": steps, "spread": np.array([[0.5, 0.3, 0.1], [0.7, 0.5, 0.3]]), "shape": np.array([[0.4, 0.2, 0.0],
                                                                                                     [0.6, 0.4, 0.2]])}
    fig = head_split_curves({0.0: None, 0.5: h}, shape_threshold=0.1)
    for ax, key in zip(fig.axes, ("spread", "shape")):
        data = [ln for ln in ax.lines if ln.get_transform() is ax.transData]
        assert len(data) == 3
        np.testing.assert_allclose(data[2].get_ydata(), np.median(h[key], 0))
        assert data[2].get_label() == r"$\rho$ = 0.5" and data[2].get_color() == HEAD_COLORS[1]
        assert ax.get_ylim() == (0, 1)
    assert _hlines(fig.axes[0]) == [0.25] and _hlines(fig.axes[1]) == [0.1]
    assert _hlines(head_split_curves({0.5: h}).axes[1]) == []
    empty = head_split_curves({0.0: None, 0.5: None}, shape_threshold=0.1)  # no positive/negative seed
    assert all(not ax.lines[1:] and ax.get_legend() is None for ax in empty.axes)


def test_length_loss_curves_band_and_training_length():
    """Every column but the band's is a curve on log-log axes; the band spans model lo..hi; a dotted
    vertical line marks the training length."""
    from icl_lib.figures import length_loss_curves

    table = pd.DataFrame({"model": [0.5, 0.3, 0.2], "model lo": [0.45, 0.28, 0.19], "model hi": [0.55, 0.33, 0.22],
                          "PGD": [0.4, 0.25, 0.18]}, index=pd.Index([10, 20, 40], name="L"))
    ax = length_loss_curves(table, 20)
    curves = [ln for ln in ax.lines if ln.get_transform() is ax.transData]
    assert [ln.get_label() for ln in curves] == ["model", "PGD"]
    np.testing.assert_allclose(curves[1].get_ydata(), [0.4, 0.25, 0.18])
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(0.19) and band[:, 1].max() == pytest.approx(0.55)
    assert _vlines(ax) == [20.0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_rho_distances_dots_and_median_lines():
    """Three series (to Gamma*, Sigma^-1, I): one dot per row, slightly offset in rho, and a line
    through the medians per rho."""
    from icl_lib.figures import rho_distances

    points = pd.DataFrame({"rho": [0.0, 0.5, 0.5, 0.5], "d(Gamma, Gamma*)": [0.1, 0.2, 0.4, 0.3],
                           "d(Gamma, Sigma^-1)": [0.1, 0.5, 0.6, 0.7], "d(Gamma, I)": [0.1, 0.9, 0.8, 1.0]})
    ax = rho_distances(points)
    assert len(ax.collections) == 3 and len(ax.lines) == 3
    for k, (col, line, dots) in enumerate(zip(["d(Gamma, Gamma*)", "d(Gamma, Sigma^-1)", "d(Gamma, I)"], ax.lines,
                                              ax.collections)):
        np.testing.assert_allclose(dots.get_offsets()[:, 0], points.rho + (k - 1) * 0.012)
        np.testing.assert_allclose(dots.get_offsets()[:, 1], points[col])
        np.testing.assert_allclose(line.get_ydata(), [points[col][0], np.median(points[col][1:])])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [r"to $\Gamma^\star$", r"to $\Sigma^{-1}$",
                                                                  r"to $I_d$"]


# ----------------------------------------------------------------------- chapter 3: valley, norms, GD
def test_gd_comparison_figure_two_columns_with_their_own_marks():
    """omega (top) and mu (bottom) for the full model (left) and GD (right); GD's (3.1) mark is left out."""
    st = _stage_summary()
    fig = gd_comparison_figure(st, st, ["full", "gd"])
    assert len(fig.axes) == 4
    top_full, top_gd, low_full, low_gd = fig.axes  # subplots are numbered row by row
    assert top_full.get_title() == "full" and top_gd.get_title() == "gd"
    assert sorted(_vlines(top_full)) == [0.0, 20.0, 40.0] and sorted(_vlines(low_gd)) == [20.0, 40.0]
    np.testing.assert_allclose(low_full.lines[1].get_ydata(), st.mu[:, 1])
    assert low_gd.get_xlabel() == "gradient-descent step" and low_full.get_xlabel() == "training step"
    assert [t.get_text() for t in top_full.get_legend().get_texts()] == st.head_labels()
    assert top_full.get_xlim() == pytest.approx((0, 60.0))


def test_valley_figure_points_curve_and_two_levels():
    w = np.array([0.01, 0.1, 0.6])
    curve_w, curve = np.geomspace(0.01, 0.6, 5), np.linspace(0.22, 0.28, 5)
    fig = valley_figure(w, [0.24, 0.25, 0.29], [0.01, 0.01, 0.02], curve_w, curve, 0.2209, 0.2429)
    ax = fig.axes[0]
    assert sorted(_hlines(ax)) == [0.2209, 0.2429]
    bars = ax.containers[0]
    np.testing.assert_allclose(np.asarray(bars.lines[0].get_ydata(), float), [0.24, 0.25, 0.29])
    segs = bars.lines[2][0].get_segments()  # error bars: two standard errors each way
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segs], [0.04, 0.04, 0.08])
    curve = [ln for ln in ax.lines if ln.get_label() == "(4.1)"][0]
    np.testing.assert_allclose(curve.get_ydata(), np.linspace(0.22, 0.28, 5))
    assert ax.get_xscale() == "log"


def test_norm_violins_three_panels_and_the_law_in_panel_c():
    rng = np.random.default_rng(0)
    rows = [{"panel": p, "setting": f"L={Lp}", "L": Lp, "norm": v}
            for p in "abc" for Lp in (10, 40) for v in rng.uniform(0.1, 0.9, 30)]
    draws = pd.DataFrame(rows)
    stats = draws.groupby(["panel", "L"]).agg(median=("norm", "median"))
    stats["law median"] = [np.nan, np.nan, np.nan, np.nan, 0.5, 0.3]
    fig = norm_violins(draws, stats, d=5, L=40, omega=1.0)
    a, b, c = fig.axes[:3]
    assert a.get_title() == "(a) d = 5, omega = 1" and c.get_title() == "(c) d/L = 5/40, omega = 1/sqrt(d)"
    assert [t.get_text() for t in a.get_xticklabels()] == ["L=10", "L=40"]
    ticks = c.collections[-1]  # the law's markers, drawn last
    np.testing.assert_allclose(ticks.get_offsets(), [[0, 0.5], [1, 0.3]])
    assert c.get_legend() is not None and a.get_legend() is None


def test_landscape_panels_of_a_high_noise_level_raise_their_top():
    """All losses above the default top (large sigma2): the scale runs from the lowest to twice it."""
    w, m = np.linspace(0.1, 1.0, 5), np.linspace(0.2, 2.0, 4)
    true = 10.0 + np.outer(m, w)
    fig = landscape_panels(w, m, true, true + 0.5, top=1.5)
    cs = fig.axes[1].collections[0]
    assert cs.norm.vmin == pytest.approx(true.min()) and cs.norm.vmax == pytest.approx(2 * true.min())
    assert np.all(np.diff(cs.levels) > 0)


def test_stage_timeline_without_any_established_stage_has_no_legend():
    st = _stage_summary()
    st.shape_step = st.stage1_step = st.stage2_step = None
    ax = stage_timeline([("A", st)], last_step=50)
    assert ax.get_legend() is None and len(ax.collections) == 0


# ----------------------------------------------------------------------------- chapter 5 (figures.optimality)
def _variant_run(omega, mu, attention="softmax", seed=0, d=3):
    """A 2-head run whose history grows linearly to KQ_h = +-omega I, OV_h = +-mu e_y (steps 0, 10, 100)."""
    KQ = torch.zeros(3, 2, d + 1, d + 1, dtype=torch.float64)
    OV = torch.zeros(3, 2, 1, d + 1, dtype=torch.float64)
    for t, frac in enumerate((0.0, 0.5, 1.0)):
        for h, sign in enumerate((1.0, -1.0)):
            KQ[t, h, :d, :d] = sign * frac * omega * torch.eye(d, dtype=torch.float64)
            OV[t, h, 0, d] = sign * frac * mu
    spec = RunSpec(data=DataConfig(d=d, L=6), model=ModelConfig(heads=2, attention=attention), seed=seed)
    return Run(spec=spec, params={}, history={"step": torch.tensor([0, 10, 100]), "KQ": KQ, "OV": OV})


def test_bayes_ratio_plot_lines_per_noise_level_and_finite_size_markers():
    """One limit line per sigma2 column (its values, a log xi axis) and the grid's ratios as markers of its colour."""
    from icl_lib.figures import bayes_ratio_plot

    xi = np.array([0.1, 1.0, 10.0])
    limits = pd.DataFrame({0.1: [1.2, 2.0, 1.1], 1.0: [1.01, 1.1, 1.0]}, index=pd.Index(xi, name="xi"))
    grid = pd.DataFrame({"xi": [0.5, 2.0, 0.5], "sigma2": [0.1, 0.1, 1.0], "ratio": [1.8, 1.5, 1.05]})
    ax = bayes_ratio_plot(limits, grid, d=16)
    assert len(ax.lines) == 4 and ax.get_xscale() == "log"
    lim01, mark01, lim1, mark1 = ax.lines
    np.testing.assert_allclose(lim01.get_xdata(), xi)
    np.testing.assert_allclose(lim1.get_ydata(), [1.01, 1.1, 1.0])
    assert mark01.get_marker() == "o" and list(mark01.get_ydata()) == [1.8, 1.5] and list(mark1.get_xdata()) == [0.5]
    assert mark01.get_color() == lim01.get_color() != lim1.get_color()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["sigma^2 = 0.1", "sigma^2 = 1"]
    assert "d = 16" in ax.get_title()


def test_bayes_ratio_plot_with_trained_models_adds_error_bars_and_exact_ratios():
    from icl_lib.figures import bayes_ratio_plot

    xi = np.array([0.1, 1.0])
    limits = pd.DataFrame({0.1: [1.2, 2.0]}, index=pd.Index(xi, name="xi"))
    grid = pd.DataFrame({"xi": [0.5], "sigma2": [0.1], "ratio": [1.8]})
    trained = pd.DataFrame({"d": [8, 8], "loss/R_Bayes": [2.1, 2.5], "se (vs R_Bayes)": [0.05, 0.1],
                            "R_dGD*/R_Bayes": [2.05, 2.55]}, index=pd.Index([0.125, 0.5], name="xi"))
    ax = bayes_ratio_plot(limits, grid, d=16, trained=trained, sigma2=0.1)
    assert len(ax.containers) == 1 and ax.containers[0].has_yerr
    bars = ax.containers[0].lines[2][0].get_segments()  # 95% bars: +- 1.96 se
    assert np.allclose([s[1, 1] - s[0, 1] for s in bars], [2 * 1.96 * 0.05, 2 * 1.96 * 0.1])
    crosses = ax.lines[-1]
    assert crosses.get_marker() == "x" and list(crosses.get_ydata()) == [2.05, 2.55]
    assert any("trained, d = 8" in t.get_text() for t in ax.get_legend().get_texts())


def test_linearisation_plot_curves_guides_and_trained_points():
    from icl_lib.figures import linearisation_plot

    w = np.array([0.01, 0.02, 0.04])
    table = pd.DataFrame({"paired heads": w**2, "unequal": w}, index=pd.Index(w, name="omega"))
    trained = pd.DataFrame({"|omega|": [0.03], "relative RMS (dGD)": [0.002]})
    ax = linearisation_plot(table, trained)
    assert ax.get_xscale() == ax.get_yscale() == "log" and len(ax.lines) == 5
    curve, guide2, curve1, guide1, points = ax.lines
    np.testing.assert_allclose(guide2.get_ydata(), w**2)  # slope 2 through the first point
    np.testing.assert_allclose(guide1.get_ydata(), w)
    assert points.get_marker() == "^" and list(points.get_xdata()) == [0.03]
    assert len(linearisation_plot(table).lines) == 4  # without trained models


def test_linear_softmax_plot_two_models_with_their_predictions():
    """Error bars for softmax and linear attention, the two closed-form predictions as lines, the training length."""
    from icl_lib.figures import linear_softmax_plot

    index = pd.Index([5, 10, 40], name="L")
    table = pd.DataFrame({"softmax": [0.9, 0.6, 0.25], "linear": [0.9, 0.75, 0.24],
                          "predicted softmax": [1.0, 0.6, 0.24], "predicted linear": [0.9, 0.75, 0.24]}, index=index)
    errors = pd.DataFrame({"softmax": [0.01] * 3, "linear": [0.02] * 3}, index=index)
    ax = linear_softmax_plot(table, errors, train_L=10)
    assert len(ax.containers) == 2 and all(c.has_yerr for c in ax.containers)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [c.get_label() for c in ax.containers] == ["softmax attention (2 heads)",
                                                      "linear attention (2 heads, N fixed)"]
    assert len(labels) == 4
    np.testing.assert_allclose(ax.containers[1].lines[0].get_ydata(), [0.9, 0.75, 0.24])
    pred = next(ln for ln in ax.lines if ln.get_label() == "prediction: vanilla GD, step x L/N")
    assert list(pred.get_ydata()) == [0.9, 0.75, 0.24]
    assert _vlines(ax) == [10.0] and list(ax.get_xticks()) == [5, 10, 40]


@pytest.mark.parametrize("n", [1, 3])
def test_activation_circuits_one_titled_subfigure_per_activation(n):
    """One sub-figure per activation (also for a single one) titled with f, the seed and the pattern."""
    from icl_lib.figures import activation_circuits

    names = ["exp (softmax)", "1 + tanh(s)", "(1 + s)^2"][:n]
    runs = {name: _variant_run(0.2, 2.0, seed=k) for k, name in enumerate(names)}
    fig = activation_circuits(runs, d=3)
    assert len(fig.subfigs) == n and len(fig.axes) == n * (4 + 2)  # 2 KQ, 2 OV panels and 2 colour bars
    assert [sf.get_suptitle() for sf in fig.subfigs] == [f"f = {name}, seed {k}: pos/neg" for k, name in enumerate(names)]
    kq = next(ax for ax in fig.subfigs[-1].axes if ax.images)
    np.testing.assert_allclose(kq.images[0].get_array(), runs[names[-1]].KQ[0].numpy())


@pytest.mark.parametrize("n", [1, 2])
def test_activation_dynamics_omega_and_mu_over_ten_per_head(n):
    """One panel per activation with omega_h (solid) and mu_h / 10 (dashed) per head on a log step axis."""
    from icl_lib.figures import activation_dynamics

    runs = {name: _variant_run(0.2, 3.0) for name in ["exp (softmax)", "(1 + s)^2"][:n]}
    fig = activation_dynamics(runs, d=3)
    axes = fig.axes
    assert len(axes) == n and all(ax.get_xscale() == "log" for ax in axes)
    assert [ax.get_title() for ax in axes] == [f"f = {name}" for name in runs]
    lines = {ln.get_label(): ln for ln in axes[0].lines}
    np.testing.assert_allclose(lines["omega_2"].get_ydata(), [0.0, -0.1, -0.2])
    np.testing.assert_allclose(lines["mu_1 / 10"].get_ydata(), [0.0, 0.15, 0.3])
    assert lines["mu_1 / 10"].get_linestyle() == "--" and list(lines["omega_1"].get_xdata()) == [1, 10, 100]
    assert axes[0].get_legend() is not None and all(ax.get_legend() is None for ax in axes[1:])
