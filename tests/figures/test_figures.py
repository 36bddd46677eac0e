"""Every figure of icl_lib.figures on small inputs: panel counts, what the panels show, colour scales,
reference lines, marks and axis scales (Agg backend, figures closed after each test)."""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from icl_lib import DataConfig
from icl_lib.config import ModelConfig, RunSpec
from icl_lib.engine import Run
from icl_lib.figures import (
    circuit_heatmaps,
    compare_figure,
    dynamics,
    excess_curves,
    gamma_heatmaps,
    landscape_panels,
    loglog_points,
    loss_curves,
    matrix_heatmaps,
    phase_figure,
    plot_against_L,
    set_style,
    snapshot_heatmaps,
    stage_dynamics_figure,
    stage_timeline,
    task_loss_plot,
)
from icl_lib.paper1.approx_loss import ApproxLossConfig
from icl_lib.paper1.multitask.head_modes import effective_gamma
from icl_lib.paper1.multitask.references import reference_risks
from icl_lib.paper1.ode import FlowConfig, gradient_flow
from icl_lib.paper2.fits import Fit
from tests.figures.figures_common import _hlines, _stage_summary, _vlines

matplotlib.use("Agg")
MT_DATA = DataConfig(d=6, L=40, sigma2=0.1, supports=[[0, 1, 2, 3], [2, 3, 4, 5]])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def flows():
    """Two short gradient flows (d = 5 and d = 10) whose omega_1 peaks before t_max."""
    return {f"d={d}": gradient_flow(FlowConfig(ApproxLossConfig(d, 40, 0.1), t_max=50.0)) for d in (5, 10)}


# ------------------------------------------------------------------------------------- style
def test_set_style_restores_the_book_style():
    """set_style must reset what a chapter changed (dpi, title size) and turn the white grid back on."""
    plt.rcParams.update({"figure.dpi": 50, "axes.titlesize": 20, "axes.grid": False})
    set_style()
    assert plt.rcParams["figure.dpi"] == 100 and plt.rcParams["savefig.dpi"] == 100
    assert plt.rcParams["axes.titlesize"] == 10
    assert plt.rcParams["axes.grid"] and plt.rcParams["axes.facecolor"] == "white"


# ---------------------------------------------------------------------------------- heatmaps
def test_circuit_heatmaps_show_each_head_on_shared_symmetric_scales(gen):
    """A panel per head and circuit, showing that head's matrix, with one scale per circuit centred at 0."""
    KQ = torch.randn(3, 5, 5, generator=gen, dtype=torch.float64)
    OV = torch.randn(3, 1, 5, generator=gen, dtype=torch.float64)
    fig = circuit_heatmaps(KQ, OV, 4, title="model", head_labels=["a", "b", "c"])
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6 and len(fig.axes) == 8  # 2 x 3 panels and two colour bars
    kq_max, ov_max = float(KQ.abs().max()), float(OV.abs().max())
    for h in range(3):
        kq_im, ov_im = panels[h].images[0], panels[3 + h].images[0]
        np.testing.assert_allclose(kq_im.get_array(), KQ[h].numpy())
        np.testing.assert_allclose(ov_im.get_array(), OV[h].numpy())
        assert kq_im.get_clim() == pytest.approx((-kq_max, kq_max))
        assert ov_im.get_clim() == pytest.approx((-ov_max, ov_max))
    assert [ax.get_title() for ax in panels[:3]] == ["KQ, a", "KQ, b", "KQ, c"]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["x1", "x2", "x3", "x4", "y"]
    assert fig.get_suptitle() == "model"
    assert not any(ax.texts for ax in panels)  # annotate=False


def test_circuit_heatmaps_annotate_and_name_multi_output_rows(gen):
    """annotate writes every entry; N outputs are named y1..yN and OV1..OVN; all-zero circuits still draw."""
    KQ = torch.zeros(1, 5, 5, dtype=torch.float64)
    OV = torch.randn(1, 2, 5, generator=gen, dtype=torch.float64)
    fig = circuit_heatmaps(KQ, OV, 3, annotate=True)
    kq_ax, ov_ax = [ax for ax in fig.axes if ax.images]
    assert len(kq_ax.texts) == 25 and len(ov_ax.texts) == 10
    assert kq_ax.texts[0].get_text() == "0.00"
    assert kq_ax.images[0].get_clim() == (-1.0, 1.0)  # zero circuits fall back to the scale [-1, 1]
    assert [t.get_text() for t in kq_ax.get_xticklabels()][-2:] == ["y1", "y2"]
    assert [t.get_text() for t in ov_ax.get_yticklabels()] == ["OV1", "OV2"]


def test_snapshot_heatmaps_show_the_nearest_logged_steps(gen):
    """One sub-figure per (snapshot, run), each showing the circuits at the logged step nearest the asked one."""
    steps = torch.tensor([0, 5, 10, 20])
    KQ = torch.randn(4, 2, 4, 4, generator=gen, dtype=torch.float64)
    OV = torch.randn(4, 2, 1, 4, generator=gen, dtype=torch.float64)
    spec = RunSpec(data=DataConfig(d=3, L=6), model=ModelConfig(heads=2))
    run = Run(spec=spec, params={}, history={"step": steps, "KQ": KQ, "OV": OV})
    fig = snapshot_heatmaps([("A", run, None), ("B", run, ["p", "q"])], at_steps=[1, 12])
    assert len(fig.subfigs) == 4 and len(fig.axes) == 4 * 6
    titles = [sf.get_suptitle() for sf in fig.subfigs]
    assert sorted(titles) == sorted(["A, step 0", "B, step 0", "A, step 10", "B, step 10"])
    at10 = next(sf for sf in fig.subfigs if sf.get_suptitle() == "B, step 10")
    kq_panels = [ax for ax in at10.axes if ax.images][:2]
    np.testing.assert_allclose(kq_panels[1].images[0].get_array(), KQ[2, 1].numpy())
    assert kq_panels[0].get_title() == "KQ, p"


def test_matrix_heatmaps_show_each_matrix_centred_at_zero():
    """One annotated panel per matrix, showing it, with its own symmetric scale unless share_scale."""
    mats = {"eye": torch.eye(3), "neg": -2.0 * torch.ones(3, 3), "mixed": torch.tensor([[0.5, -1.5], [0.0, 1.0]])}
    fig = matrix_heatmaps(mats)
    assert len(fig.axes) == 3 and [ax.get_title() for ax in fig.axes] == list(mats)
    for ax, (name, m), lim in zip(fig.axes, mats.items(), (1.0, 2.0, 1.5)):
        mesh = ax.collections[0]
        np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(m.shape), m.numpy())
        assert mesh.get_clim() == pytest.approx((-lim, lim))
        assert len(ax.texts) == m.numel()
    fig = matrix_heatmaps(mats, annotate=False, share_scale=True)
    assert all(ax.collections[0].get_clim() == pytest.approx((-2.0, 2.0)) for ax in fig.axes)
    assert not any(ax.texts for ax in fig.axes)


def _circuits(omegas, mus, d=6, N=2):
    """KQ (H, D, D) with diagonal block diag(omega_h), OV (H, N, D) with OV[h, n, d + n] = mu_{h, n}."""
    omegas, mus = torch.tensor(omegas, dtype=torch.float64), torch.tensor(mus, dtype=torch.float64)
    H, D = omegas.shape[0], d + N
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    KQ[:, :d, :d] = torch.diag_embed(omegas)
    OV = torch.zeros(H, N, D, dtype=torch.float64)
    OV[:, :, d:] = torch.diag_embed(mus)
    return KQ, OV


def test_gamma_heatmaps_scale_each_panel_and_outline_the_supports():
    """A panel per model, scaled by its largest entry to [-1, 1], with one outlined cell per support entry."""
    KQ, OV = _circuits([[-1, -1, -1.5, -1.5, -0.5, -0.5], [0.5, 0.5, 1.5, 1.5, 1, 1], [-2.5, -2.5, 0, 0, 2.5, 2.5]],
                       [[-1, -2], [2, 1], [-1, 1]])
    g, _ = effective_gamma(KQ, OV, 6)
    other = torch.tensor([[2.0, 0, 0, 0, 0, -4.0], [0, 1.0, 0, 0, 0, 0]], dtype=torch.float64)
    fig = gamma_heatmaps([g, other], ["a", "b"], MT_DATA)
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["a", "b"]
    for ax in fig.axes:
        assert len(ax.patches) == 8  # the outlined support cells: 4 + 4
        assert ax.collections[0].get_clim() == (-1, 1)
    shown = np.asarray(fig.axes[1].collections[0].get_array()).reshape(2, 6)
    np.testing.assert_allclose(shown, other.numpy() / 4.0)
    corners = {(int(p.get_x()), int(p.get_y())) for p in fig.axes[0].patches}
    assert corners == {(j, n) for n, S in enumerate(MT_DATA.supports) for j in S}


# ------------------------------------------------------------------------------------ curves
def test_dynamics_draws_one_line_per_head_and_the_marks():
    """A line per head with its label, a vertical line per mark, symlog only when asked."""
    steps = np.array([0, 1, 10, 100])
    values = np.arange(12.0).reshape(4, 3)
    ax = dynamics(steps, values, "omega", labels=["a", "b", "c"], marks={"I": 10, "II": 100})
    heads = [ln for ln in ax.lines if ln.get_label() in ("a", "b", "c")]
    assert len(heads) == 3
    np.testing.assert_allclose(heads[2].get_ydata(), values[:, 2])
    assert sorted(_vlines(ax)) == [10.0, 100.0]
    assert _hlines(ax) == [0.0]
    assert {t.get_text() for t in ax.texts} == {" I", " II"}
    assert ax.get_xscale() == "linear" and ax.get_ylabel() == "omega"
    ax = dynamics(torch.arange(4.0), torch.ones(4), "mu", logx=True)  # one head as a 1-d tensor
    assert [ln.get_label() for ln in ax.lines if ln.get_label().startswith("head")] == ["head 1"]
    assert ax.get_xscale() == "symlog"


def test_loss_curves_draw_curves_references_and_bands():
    """A line per curve, a horizontal line at each reference value, a band where errors are given."""
    x = np.array([1.0, 10.0, 100.0])
    curves = {"H=1": [1.0, 0.5, 0.3], "H=2": torch.tensor([0.9, 0.4, 0.2])}
    ax = loss_curves(x, curves, references={"Bayes": 0.25, "GD": 0.28}, errors={"H=2": [0.1, 0.1, 0.1]},
                     logx=True, logy=True)
    data = [ln for ln in ax.lines if ln.get_label() in curves]
    assert len(data) == 2
    np.testing.assert_allclose(data[1].get_ydata(), [0.9, 0.4, 0.2])
    assert sorted(_hlines(ax)) == [0.25, 0.28]
    assert "Bayes (0.2500)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(ax.collections) == 1  # one error band
    np.testing.assert_allclose(ax.collections[0].get_paths()[0].vertices[:, 1].max(), 1.0)  # 0.9 + 0.1
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ax = loss_curves(x, curves)
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "linear" and not ax.collections


def test_plot_against_L_errorbars_references_and_training_length():
    """An error-bar series per curve, a line per reference, a vertical line at train_L, ticks at the Ls."""
    Ls = [10, 20, 40]
    ax = plot_against_L(Ls, {"H=1": [0.5, 0.4, 0.3], "H=2": [0.45, 0.35, 0.3]}, errors={"H=1": [0.01] * 3},
                        references={"Bayes": [0.3, 0.25, 0.2]}, train_L=20)
    assert len(ax.containers) == 2
    assert ax.containers[0].has_yerr and not ax.containers[1].has_yerr
    ref = [ln for ln in ax.lines if ln.get_label() == "Bayes"]
    assert len(ref) == 1 and list(ref[0].get_ydata()) == [0.3, 0.25, 0.2]
    assert _vlines(ax) == [20.0]
    assert list(ax.get_xticks()) == Ls and [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "40"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ax = plot_against_L(Ls, {"H=1": [0.5, 0.4, 0.3]}, logy=False)
    assert ax.get_yscale() == "linear" and not _vlines(ax)


def test_excess_curves_plot_the_median_with_a_band_on_a_log_scale():
    """Each method's median over repetitions (clipped above 0), a min-max band for repetitions, the floor."""
    reps = np.array([[1.0, 2.0, 4.0], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]])  # (T+1, R)
    ax = excess_curves({"GD": reps, "one": np.array([1.0, 0.5, 0.25])}, floor=1e-3, styles={"one": "--"})
    gd, one = (next(ln for ln in ax.lines if ln.get_label() == lab) for lab in ("GD", "one"))
    np.testing.assert_allclose(gd.get_ydata(), [2.0, 0.2, 1e-32])
    np.testing.assert_allclose(gd.get_xdata(), [0, 1, 2])
    assert one.get_linestyle() == "--"
    assert len(ax.collections) == 1  # only the method with repetitions has a band
    assert _hlines(ax) == [1e-3]
    assert ax.get_yscale() == "log"


def test_loglog_points_draw_the_fitted_power_law():
    """Points with error bars, the fit exp(intercept) x^slope over the x range, references, log-log axes."""
    x, y = np.array([10.0, 100.0, 1000.0]), np.array([1.0, 0.1, 0.01])
    fit = Fit(slope=-1.0, intercept=np.log(10.0), slope_se=0.05, intercept_se=0.1, r2=1.0, n_points=3)
    ax = loglog_points(x, y, yerr=0.1 * y, fit=fit, references={"1/n": 1 / x})
    assert len(ax.containers) == 1 and ax.containers[0].has_yerr
    line = next(ln for ln in ax.lines if ln.get_label().startswith("fit: slope -1.00"))
    xs = np.asarray(line.get_xdata())
    assert xs[0] == pytest.approx(10.0) and xs[-1] == pytest.approx(1000.0)
    np.testing.assert_allclose(line.get_ydata(), 10.0 / xs)
    assert [ln.get_label() for ln in ax.lines].count("1/n") == 1
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


# ------------------------------------------------------------------------------------ stages
def test_stage_dynamics_figure_three_panels_per_run_with_the_stage_marks():
    """Three panels per run; marks at the detected steps; the zoom panel keeps only steps and marks <= zoom_step."""
    st = _stage_summary()
    fig = stage_dynamics_figure([("run A", st), ("run B", st)], zoom_step=25)
    assert len(fig.axes) == 6
    full, zoom, mu_ax = fig.axes[:3]
    assert sorted(_vlines(full)) == [0.0, 20.0, 40.0] and sorted(_vlines(zoom)) == [0.0, 20.0]
    heads = [ln for ln in zoom.lines if ln.get_label().startswith("head")]
    assert len(heads) == 2 and max(heads[0].get_xdata()) == 20
    mu_lines = [ln for ln in mu_ax.lines if ln.get_label().startswith("head")]
    np.testing.assert_allclose(mu_lines[1].get_ydata(), st.mu[:, 1])
    assert full.get_legend() is not None and zoom.get_legend() is None and mu_ax.get_legend() is None
    assert fig.axes[3].get_title() == "run B: KQ scale"


def test_stage_timeline_one_row_per_run_and_a_marker_per_found_stage():
    """A row per run, a marker per established stage at its step (step 0 drawn at 1), log x axis."""
    st = _stage_summary()
    late = _stage_summary()
    late.stage2_step = None  # Stage II never established in this run
    ax = stage_timeline([("A", st), ("B", late)], last_step=50)
    points = sorted(tuple(map(float, off)) for c in ax.collections for off in c.get_offsets())
    assert points == [(1.0, 0.0), (1.0, 1.0), (20.0, 0.0), (20.0, 1.0), (40.0, 0.0)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "B"]
    assert ax.get_xscale() == "log" and ax.yaxis_inverted()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pattern (3.1)", "Stage I", "Stage II"]


# --------------------------------------------------------------------------------- landscape
def test_landscape_panels_difference_and_two_landscapes():
    """The difference on a symmetric scale, both landscapes on one log scale up to `top`, the valley on every panel."""
    w, m = np.linspace(0.1, 1.0, 5), np.linspace(0.2, 2.0, 4)
    true = 0.3 + np.outer(m, w)
    approx = true + 0.01 * np.arange(20).reshape(4, 5) - 0.05
    fig = landscape_panels(w, m, true, approx, valley_w=w, valley_m=0.5 * w + 0.2, top=1.5)
    diff_ax, true_ax, approx_ax = fig.axes[:3]
    assert len(fig.axes) == 5  # three panels and two colour bars
    mesh = diff_ax.collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(4, 5), true - approx)
    lim = float(np.abs(true - approx).max())
    assert (mesh.norm.vmin, mesh.norm.vmax) == pytest.approx((-lim, lim))
    for ax in (true_ax, approx_ax):
        cs = ax.collections[0]
        assert cs.norm.vmax == 1.5 and cs.norm.vmin == pytest.approx(min(true.min(), approx.min()))  # one shared scale
        assert cs.levels[-1] == pytest.approx(1.5)
    assert all(len(ax.lines) == 1 for ax in (diff_ax, true_ax, approx_ax))
    np.testing.assert_allclose(true_ax.lines[0].get_ydata(), 0.5 * w + 0.2)
    assert diff_ax.get_ylim() == pytest.approx((0.2, 2.0))


# ------------------------------------------------------------------------------------- flows
def test_phase_figure_four_panels_with_phases_and_reference_levels(flows):
    """Four panels (plus the ratio's twin axis), the four coordinates, three shaded phases, loss* and s* lines."""
    res = flows["d=5"]
    fig = phase_figure(res, title="flow")
    assert len(fig.axes) == 5
    a, b, c, e, c2 = fig.axes
    coords = [ln for ln in a.lines if ln.get_label().startswith("$")]
    assert len(coords) == 4
    np.testing.assert_allclose(coords[2].get_ydata(), res.sample(coords[2].get_xdata())[:, 2])
    assert len(b.patches) == 3  # phases I, II and III (up to 2.5 t_II)
    spans = sorted(p.get_x() for p in b.patches)
    assert spans == pytest.approx([0.0, res.t_phase1, res.t_peak])
    assert res.config.loss.loss_star in _hlines(c)
    assert _hlines(e) == pytest.approx([res.s_star])
    assert e.get_yscale() == "log" and c2.get_yscale() == "log" and a.get_xscale() == "symlog"
    assert fig.get_suptitle() == "flow"


def test_compare_figure_marks_each_flows_phase_boundaries(flows):
    """Two lines and two boundary marks per flow in panel (a), the gap and its law per flow on log-log axes."""
    fig = compare_figure(flows)
    assert len(fig.axes) == 2
    a, b = fig.axes
    marks = sorted(_vlines(a))
    want = sorted(x for r in flows.values() for x in (r.t_phase1, r.t_peak))
    assert marks == pytest.approx(want)
    assert len([ln for ln in a.lines if ln.get_label().startswith("$")]) == 4  # omega_1 and mu_1 per flow
    assert max(a.lines[0].get_xdata()) == pytest.approx(2.5 * max(r.t_peak for r in flows.values()))
    assert len(b.lines) == 4 and b.get_xscale() == "log" and b.get_yscale() == "log"
    assert min(b.lines[0].get_xdata()) > flows["d=5"].t_peak  # Phase III only
    fig = compare_figure(flows, t_zoom=3.0)
    assert max(fig.axes[0].lines[0].get_xdata()) == pytest.approx(3.0)


# ------------------------------------------------------------------------------------ strips
def test_task_loss_plot_one_panel_per_task_with_the_references():
    """A panel per task with a dot per model and horizontal lines at the task's four reference risks."""
    refs = reference_risks(MT_DATA, n_bayes=2_000)
    losses = pd.DataFrame([{"H": H, "seed": s, "task": t, "loss": 0.2 + 0.01 * s, "mode": "kernel" if H == 1 else "mixed"}
                           for H in (1, 3) for s in range(2) for t in (1, 2)])
    fig = task_loss_plot(losses, refs)
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["task 1", "task 2"]
    for t, ax in zip((1, 2), fig.axes):
        levels = {round(y, 10) for y in _hlines(ax)}
        assert len(levels) == 4
        for name in ("Bayes", "dGD on support", "shared weighted dGD", "dGD on all coordinates"):
            assert round(float(refs.loc[t, name]), 10) in levels
        assert sum(len(c.get_offsets()) for c in ax.collections) == 4  # 2 head counts x 2 seeds
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["kernel", "mixed"] and "Bayes" in labels
