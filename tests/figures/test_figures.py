"""Every figure of icl_lib.figures on small inputs: panel counts, what the panels show, colour scales,
reference lines, marks and axis scales (Agg backend, figures closed after each test)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from icl_lib import DataConfig  # noqa: E402
from icl_lib.config import ModelConfig, RunSpec  # noqa: E402
from icl_lib.engine import Run  # noqa: E402
from icl_lib.figures import (  # noqa: E402
    circuit_heatmaps,
    compare_figure,
    dynamics,
    excess_curves,
    gamma_heatmaps,
    gd_comparison_figure,
    landscape_panels,
    loglog_points,
    loss_curves,
    matrix_heatmaps,
    norm_violins,
    phase_figure,
    plot_against_L,
    set_style,
    snapshot_heatmaps,
    stage_dynamics_figure,
    stage_timeline,
    task_loss_plot,
    valley_figure,
)
from icl_lib.paper1.approx_loss import ApproxLossConfig  # noqa: E402
from icl_lib.paper1.dynamics.landscape import reparam_circuits
from icl_lib.paper1.dynamics.stage_detection import detect_stages
from icl_lib.paper1.multitask.head_modes import effective_gamma
from icl_lib.paper1.multitask.references import reference_risks
from icl_lib.paper1.ode import FlowConfig, gradient_flow  # noqa: E402
from icl_lib.paper2.fits import Fit

MT_DATA = DataConfig(d=6, L=40, sigma2=0.1, supports=[[0, 1, 2, 3], [2, 3, 4, 5]])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def flows():
    """Two short gradient flows (d = 5 and d = 10) whose omega_1 peaks before t_max."""
    return {f"d={d}": gradient_flow(FlowConfig(ApproxLossConfig(d, 40, 0.1), t_max=50.0)) for d in (5, 10)}


def _stage_summary():
    """A two-head history (steps 0, 10, ..., 50): pattern (3.1) throughout, Stage I from 20, Stage II from 40."""
    omega = [[0.1, 0.05]] * 2 + [[0.1, -0.05]] * 2 + [[0.1, -0.1]] * 2
    mu = [[0.1, 0.1]] * 2 + [[1.0, -1.0]] * 4
    KQ, OV = reparam_circuits(torch.tensor(omega, dtype=torch.float64), torch.tensor(mu, dtype=torch.float64), 5)
    st = detect_stages(KQ, OV, torch.arange(6) * 10, 5)
    assert st.marks() == {"(3.1)": 0, "I": 20, "II": 40}  # the design the figure tests rely on
    return st


def _vlines(ax):
    """x positions of the vertical lines (axvline) of ``ax``."""
    return [float(ln.get_xdata()[0]) for ln in ax.lines if len(set(np.asarray(ln.get_xdata(), float))) == 1
            and len(ln.get_xdata()) == 2 and ln.get_transform() is not ax.transData]


def _hlines(ax):
    """y positions of the horizontal lines (axhline) of ``ax``."""
    return [float(ln.get_ydata()[0]) for ln in ax.lines if len(ln.get_ydata()) == 2
            and ln.get_ydata()[0] == ln.get_ydata()[1] and ln.get_transform() is not ax.transData]


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
# ------------------------------------------------------------------ heads sweep (chapter 2)
from icl_lib.figures import loss_strip, stacked_circuit_heatmaps  # noqa: E402
from icl_lib.figures.strips import PATTERN_COLORS  # noqa: E402


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
