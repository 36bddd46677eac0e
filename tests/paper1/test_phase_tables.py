"""Chapter 9's statistics, tables and the comparisons behind its claims (icl_lib.paper1.phase_diagram.grid,
phase_outcomes)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from icl_lib import DataConfig
from icl_lib.claims import Below
from icl_lib.config import RunSpec, TrainConfig
from icl_lib.paper1.phase_diagram import grid as ph
from icl_lib.paper1.phase_diagram.outcomes import (
    MIN_CELL_RUNS,
    UNDECIDED,
    cell_table,
    outcome_counts,
    rate_estimates,
    time_panels,
    time_scaling,
    trap_vs_heads,
    trap_vs_lr,
    worst_cell,
    worst_cell_where,
)
from icl_lib.paper1.phase_diagram import outcomes as phase_outcomes
from icl_lib.stats import (
    censored_median_ci,
    fraction_diff,
    linear_slope,
    loglog_slope,
    mean_ci,
    median_ci,
    proportion_ci,
)



# ------------------------------------------------------------------------------------ statistics
def test_censored_median_is_the_order_statistic_interval_with_censored_seeds_last():
    t = [30, 10, None, 20, 50, 40, None, 60]
    e = censored_median_ci(t)
    a = sorted(x for x in t if x is not None) + [math.inf, math.inf]
    assert e.value == (a[3] + a[4]) / 2 == 45.0
    assert (e.lo, e.hi) == (10.0, math.inf)  # n = 8: [x_(1), x_(8)]
    assert censored_median_ci([float("nan"), 5.0, 7.0]).value == 7.0  # nan: pandas' None
    full = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert censored_median_ci(full) == median_ci(full)
    assert censored_median_ci([None] * 5 + [1.0]).value == math.inf
    with pytest.raises(ValueError, match=r"^times="):
        censored_median_ci([])


def _cells_of(values_by_cell):
    """Model rows: one cell (d = 2 + index) per list of values of column ``x``."""
    return pd.DataFrame([{"H": 2, "d": 2 + j, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "x": v}
                         for j, vs in enumerate(values_by_cell) for v in vs])


def test_worst_cell_is_bonferroni_over_the_cells_t_intervals_and_decides_with_below():
    cells = [[0.01, 0.02, 0.00, 0.015], [-0.02, -0.03, -0.01], [0.05, 0.06]]
    e = worst_cell(_cells_of(cells), "x", min_runs=2)
    m = len(cells)  # the direct computation: every cell at level 1 - 0.05 / m
    lo, hi = [], []
    for vs in cells:
        x = np.asarray(vs)
        half = sps.t.ppf(1 - 0.05 / (2 * m), len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
        lo.append(x.mean() - half)
        hi.append(x.mean() + half)
    near = [0.0 if a <= 0 <= b else min(abs(a), abs(b)) for a, b in zip(lo, hi)]
    far = [max(abs(a), abs(b)) for a, b in zip(lo, hi)]
    assert (e.value, e.lo, e.hi) == pytest.approx((0.055, max(near), max(far)))
    tight = [[0.01, 0.011, 0.009], [-0.02, -0.021, -0.019]]
    assert Below(0.1).decide(*worst_cell(_cells_of(tight), "x", min_runs=2).interval) == "PASS"
    beyond = tight + [[-0.2, -0.21, -0.19]]  # one cell surely beyond 0.1
    assert Below(0.1).decide(*worst_cell(_cells_of(beyond), "x", min_runs=2).interval) == "FAIL"
    unsure = tight + [[0.05, 0.15]]  # two seeds straddling 0.1
    assert Below(0.1).decide(*worst_cell(_cells_of(unsure), "x", min_runs=2).interval) == "INCONCLUSIVE"
    assert worst_cell(_cells_of([[0.3]]), "x", min_runs=2) is UNDECIDED  # a cell of one run is left out
    # by default a cell needs MIN_CELL_RUNS runs: the cells of 2 and 3 runs above are left out
    assert MIN_CELL_RUNS == 4 and worst_cell(_cells_of(cells), "x").value == pytest.approx(0.01125)
    assert worst_cell(_cells_of(tight), "x") is UNDECIDED


def test_worst_cell_where_names_the_cell_farthest_from_zero():
    cells = [[0.01, 0.02, 0.00, 0.015], [-0.02, -0.03, -0.01], [0.05, 0.06]]
    where = worst_cell_where(_cells_of(cells), "x", min_runs=2)
    assert where["d"] == 4 and where["runs"] == 2 and where["mean"] == pytest.approx(0.055)
    assert where["cell"] == "H = 2, d = 4, L = 40, sigma^2 = 0.1, Adam rate 0.003, initial scale 1"
    assert worst_cell_where(_cells_of([[-0.5, -0.4, -0.6], [0.3, 0.2, 0.4]]), "x", min_runs=2)["d"] == 2
    assert worst_cell_where(_cells_of(cells), "x")["d"] == 2  # only the cell of four runs counts
    assert worst_cell_where(_cells_of([[0.3]]), "x", min_runs=2) == {}


def test_slopes_against_numpy_and_the_t_formula(gen):
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    y = 0.7 * x + np.array([0.1, -0.2, 0.05, 0.15, -0.1, 0.0])
    e = linear_slope(x, y)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    se = math.sqrt((resid ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    t = sps.t.ppf(0.975, len(x) - 2)
    assert (e.value, e.lo, e.hi) == pytest.approx((b, b - t * se, b + t * se))
    p = loglog_slope([2, 4, 8, 16], [3 * 2 ** -1.5, 3 * 4 ** -1.5, 3 * 8 ** -1.5, 3 * 16 ** -1.5])
    assert p.value == pytest.approx(-1.5) and p.hi - p.lo < 1e-9
    assert math.isinf(linear_slope([1, 1, 1], [1, 2, 3]).hi) and math.isinf(linear_slope([1, 2], [1, 2]).lo)
    with pytest.raises(ValueError, match=r"^y="):
        loglog_slope([1, 2, 3], [1, 0, 2])


# ------------------------------------------------------------------------------------ tables
def _row(d, L, k, outcome, eta, eta_star, t, dummies=0):
    return {"H": 2, "d": d, "L": L, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "seed": k, "outcome": outcome,
            "dummy heads": dummies, "eta": eta, "eta*": eta_star, "eta/eta*-1": eta / eta_star - 1,
            "t_pattern": t, "steps": 100}


def _models():
    rows = []
    outcomes = ["pos/neg"] * 5 + ["single-sign", "unformed", "pos/neg"]
    for k, o in enumerate(outcomes):
        rows.append(_row(5, 40, k, o, 0.85 + 0.01 * k, 0.879, 10 * (k + 1) if o == "pos/neg" else None))
    for k in range(3):
        rows.append(_row(10, 40, k, "pos/neg", 0.78 + 0.004 * k * k, 0.784, 50, dummies=1))
    for k, o in enumerate(["single-sign", "pos/neg", "single-sign"]):  # one pos/neg run only
        rows.append(_row(3, 24, k, o, 0.8 + 0.02 * k, 0.85, 30 if o == "pos/neg" else None))
    for k in range(2):  # no pos/neg run
        rows.append(_row(2, 24, k, "unformed", 0.5, 0.9, None))
    return pd.DataFrame(rows)


def _t_interval(x, level=0.95):
    """The mean and Student's t interval, by scipy."""
    x = np.asarray(x, dtype=float)
    lo, hi = sps.t.interval(level, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    return x.mean(), lo, hi


def test_cell_table_counts_fractions_and_means_per_cell():
    models = _models()
    cells = cell_table(models)
    assert len(cells) == 4 and "excess/R_dGD*" not in cells
    c = cells.iloc[0]
    assert (c["seeds"], c["k pos/neg"], c["k single-sign"], c["k unformed"], c["k single-head"]) == (8, 6, 1, 1, 0)
    assert c["pos/neg"] == proportion_ci(6, 8) and c["single-sign"] == proportion_ci(1, 8)
    assert c["single-head"] == proportion_ci(0, 8) and c["unformed"] == proportion_ci(1, 8)
    pn = models.iloc[[0, 1, 2, 3, 4, 7]]
    assert c["eta/eta*-1"] == mean_ci(pn["eta/eta*-1"]) and c["pos/neg seeds"] == 6
    e = c["eta/eta*-1"]
    assert (e.value, e.lo, e.hi) == pytest.approx(_t_interval(pn["eta/eta*-1"]))
    assert c["eta all"] == pytest.approx(np.median(models["eta"].iloc[:8])) and c["eta*"] == 0.879
    assert c["t_pattern"] == censored_median_ci([10, 20, 30, 40, 50, None, None, 80])
    c = cells.iloc[1]
    assert c["with dummy"] == 3 and c["eta*"] == 0.784 and cells.iloc[0]["with dummy"] == 0
    assert (c["eta/eta*-1"].value, c["eta/eta*-1"].lo, c["eta/eta*-1"].hi) == \
        pytest.approx(_t_interval(models["eta/eta*-1"].iloc[8:11]))
    one = cells.iloc[2]  # one pos/neg run: its value, an unbounded interval
    assert (one["d"], one["L"], one["pos/neg seeds"]) == (3, 24, 1)
    assert one["eta/eta*-1"].value == pytest.approx(0.82 / 0.85 - 1)
    assert (one["eta/eta*-1"].lo, one["eta/eta*-1"].hi) == (-math.inf, math.inf)
    none = cells.iloc[3]
    assert none["pos/neg seeds"] == 0 and math.isnan(none["eta/eta*-1"].value)
    assert (none["eta/eta*-1"].lo, none["eta/eta*-1"].hi) == (-math.inf, math.inf)
    at90 = cell_table(models, level=0.9).iloc[0]
    assert at90["eta/eta*-1"] == mean_ci(pn["eta/eta*-1"], 0.9) and at90["pos/neg"] == proportion_ci(6, 8, 0.9)


def test_cell_table_means_the_excess_loss_over_the_pos_neg_runs():
    models = _models()
    models["excess/R_dGD*"] = 0.01 * np.arange(len(models)) ** 1.5
    models["loss/R_Bayes"] = 1.0 + 0.1 * np.arange(len(models)) ** 2
    cells = cell_table(models)
    c = cells.iloc[0]
    pn = models.iloc[[0, 1, 2, 3, 4, 7]]
    assert c["excess/R_dGD*"] == mean_ci(pn["excess/R_dGD*"])
    assert (c["excess/R_dGD*"].value, c["excess/R_dGD*"].lo, c["excess/R_dGD*"].hi) == \
        pytest.approx(_t_interval(pn["excess/R_dGD*"]))
    assert c["loss/R_Bayes"] == pytest.approx(np.median(models["loss/R_Bayes"].iloc[:8]))  # over all seeds
    one = cells.iloc[2]
    assert one["excess/R_dGD*"].value == pytest.approx(models["excess/R_dGD*"].iloc[12])
    assert (one["excess/R_dGD*"].lo, one["excess/R_dGD*"].hi) == (-math.inf, math.inf)


def test_along_picks_one_line_through_the_centre():
    m = pd.DataFrame([{"H": H, "d": d, "L": L, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}
                      for H, d, L in [(2, 5, 40), (2, 10, 40), (2, 5, 80), (2, 10, 80), (3, 10, 40), (2, 3, 24)]])
    c = {"H": 1, "d": 5, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}
    assert along(m, c, "d", H=2).index.tolist() == [0, 1]
    assert along(m, c, "L", H=2).index.tolist() == [0, 2]
    assert along(m, c, "d/L", H=2).index.tolist() == [0, 3, 5]
    assert along(m, c, "H").index.tolist() == [0]  # H varies, the centre's d and L hold
    with pytest.raises(ValueError, match=r"^axis="):
        along(m, c, "rho")
along = phase_outcomes.along


def test_time_scaling_fits_the_power_law_of_the_runs_that_reached_the_pattern():
    m = pd.DataFrame({"d": [2, 2, 4, 4, 8, 8, 8], "t_pattern": [8.0, 8.0, 32.0, 32.0, 128.0, 128.0, None]})
    fit = time_scaling(m, "d")
    assert fit["slope"].value == pytest.approx(2.0) and fit["intercept"] == pytest.approx(math.log(2.0))
    assert (fit["reached"], fit["censored"]) == (6, 1)
    none = time_scaling(pd.DataFrame({"d": [2, 4], "t_pattern": [None, None]}), "d")
    assert math.isnan(none["slope"].value) and math.isnan(none["intercept"])


def test_projected_seconds_scales_each_run_by_the_numbers_it_draws():
    tc = TrainConfig(steps=1000)
    specs = [RunSpec(data=DataConfig(d=5, L=40)), RunSpec(data=DataConfig(d=10, L=80)),
             RunSpec(data=DataConfig(d=3, L=24), train=tc)]
    want = (3000 + 3000 * 81 * 11 / 246 + 1000 * 25 * 4 / 246) / 100.0
    assert ph.projected_seconds(specs, 100.0) == pytest.approx(want)
    with pytest.raises(ValueError, match=r"^rate="):
        ph.projected_seconds(specs, 0)


# ------------------------------------------------------------------------------------ comparisons for the claims
def _grid_models():
    """Runs of a small grid: the head axis at the centre (H = 1, 2, 3; 6 seeds), and for H = 2 two
    other rates and two other lengths at d = 8, with known outcomes."""
    rows = []

    def add(H, d, L, lr, outcomes, t=100):
        for k, o in enumerate(outcomes):
            rows.append({**_row(d, L, k, o, 0.8, 0.85, t * (k + 1) if o in ("pos/neg", "single-head") else None),
                         "H": H, "lr": lr})

    add(1, 5, 40, 3e-3, ["single-head"] * 6)
    add(2, 5, 40, 3e-3, ["single-sign"] * 2 + ["pos/neg"] * 4)
    add(3, 5, 40, 3e-3, ["pos/neg"] * 5 + ["single-sign"])
    add(2, 5, 40, 1e-3, ["single-sign"] * 3 + ["pos/neg"], t=300)
    add(2, 5, 40, 1e-2, ["pos/neg"] * 4, t=30)
    add(2, 8, 16, 3e-3, ["pos/neg"] * 3)
    add(2, 8, 32, 3e-3, ["pos/neg"] * 3)
    return pd.DataFrame(rows)
CENTRE = {"H": 1, "d": 5, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}


def test_the_trap_comparisons_count_the_right_cells():
    cells = cell_table(_grid_models())
    assert trap_vs_heads(cells, CENTRE) == fraction_diff(2, 6, 1, 6)  # H = 2 against H = 3 at the centre
    assert trap_vs_lr(cells, CENTRE) == fraction_diff(0, 4, 3, 4)  # lr 1e-2 minus lr 1e-3
    one_rate = cells[np.isclose(cells["lr"], 3e-3)]
    assert trap_vs_lr(one_rate, CENTRE) is UNDECIDED
    assert trap_vs_heads(cells[cells["H"] <= 2], CENTRE) is UNDECIDED


def test_time_panels_are_the_rate_line_and_each_dimension_with_several_lengths():
    models = _grid_models()
    panels = time_panels(models, CENTRE)
    assert list(panels) == ["lr", "L (d = 8)"]
    assert sorted(panels["lr"]["lr"].unique()) == [1e-3, 3e-3, 1e-2] and set(panels["lr"]["H"]) == {2}
    assert len(panels["lr"]) == 6 + 4 + 4 and sorted(panels["L (d = 8)"]["L"].unique()) == [16, 32]
    fit = time_scaling(panels["L (d = 8)"], "L")
    assert fit["slope"].value == pytest.approx(0.0, abs=1e-12)  # the same times at both lengths


def test_display_tables_keep_every_cell_and_format_estimates():
    cells = cell_table(_grid_models())
    out = outcome_counts(cells)
    assert list(out.columns) == ["H", "d", "L", "sigma2", "lr", "init", "seeds", "pos/neg", "trap", "1 head",
                                 "unformed", "dummy"]
    assert out["trap"].tolist() == cells["k single-sign"].tolist() and len(out) == len(cells) == 7
    rates = rate_estimates(cells)
    assert "eta/eta*-1" in rates and "t_pattern" in rates and "excess/R_dGD*" not in rates
    assert rates["t_pattern"].iloc[0] == format(cells["t_pattern"].iloc[0], ".3g")
